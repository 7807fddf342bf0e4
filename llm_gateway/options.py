"""The ``extra`` options a caller may pass through to litellm, and nothing else.

litellm's keyword arguments include ones that would hand the caller the server: ``api_base`` and
``base_url`` (send the tenant's stored key to any host), ``api_key``, ``mock_response``,
``custom_llm_provider``, ``callbacks`` and ``metadata`` (litellm's own hooks), ``tools`` (a different
contract than this gateway's). So ``extra`` is an allowlist of sampling options, each with a type
and a range, and everything else is refused with the field it came in.

``json_mode`` is ours, not litellm's: it asks for JSON-only output (``llm_gateway.structured``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.errors import InvalidInput
from llm_gateway.json_limits import json_shape_problem

EXTRA_NOT_ALLOWED = "extra.{key} is not an option the gateway passes through. Allowed: {allowed}."
EXTRA_INVALID = "extra.{key} {reason}."
EXTRA_TOO_LARGE = "extra {reason}."

MAX_EXTRA_KEYS = 20
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARACTERS = 200
MAX_USER_CHARACTERS = 256
MAX_LOGIT_BIAS_ENTRIES = 300


def _number(low: float, high: float) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "must be a number"
        if not low <= value <= high:
            return f"must be between {low:g} and {high:g}"
        return None

    return check


def _integer(low: int, high: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        if not low <= value <= high:
            return f"must be between {low} and {high}"
        return None

    return check


def _stop(value: Any) -> str | None:
    sequences = [value] if isinstance(value, str) else value
    if not isinstance(sequences, list) or not all(isinstance(item, str) for item in sequences):
        return "must be a string or a list of strings"
    if not 1 <= len(sequences) <= MAX_STOP_SEQUENCES:
        return f"must hold 1 to {MAX_STOP_SEQUENCES} sequences"
    if any(not 1 <= len(item) <= MAX_STOP_CHARACTERS for item in sequences):
        return f"sequences must be 1 to {MAX_STOP_CHARACTERS} characters long"
    return None


def _user(value: Any) -> str | None:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_USER_CHARACTERS:
        return f"must be a string of 1 to {MAX_USER_CHARACTERS} characters"
    return None


def _reasoning_effort(value: Any) -> str | None:
    return None if value in REASONING_EFFORTS else f"must be one of {', '.join(REASONING_EFFORTS)}"


def _logit_bias(value: Any) -> str | None:
    if not isinstance(value, dict) or len(value) > MAX_LOGIT_BIAS_ENTRIES:
        return f"must be an object of at most {MAX_LOGIT_BIAS_ENTRIES} token ids"
    number = _number(-100, 100)
    for token, bias in value.items():
        if not (isinstance(token, str) and token.isdigit() and len(token) <= 10) or number(bias):
            return "must map token ids (digits) to numbers between -100 and 100"
    return None


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


# Sampling options every provider litellm routes to either takes or drops (drop_params=True).
_ALLOWED: dict[str, Callable[[Any], str | None]] = {
    "top_p": _number(0, 1),
    "top_k": _integer(1, 1000),
    "stop": _stop,
    "seed": _integer(-(2**63), 2**63 - 1),
    "presence_penalty": _number(-2, 2),
    "frequency_penalty": _number(-2, 2),
    "reasoning_effort": _reasoning_effort,
    "user": _user,
    "logit_bias": _logit_bias,
    "json_mode": _boolean,
}
ALLOWED_EXTRA = tuple(_ALLOWED)


@dataclass(frozen=True)
class ExtraOptions:
    """``extra`` checked: litellm's options, and whether JSON-only output was asked for."""

    options: dict[str, Any]
    json_mode: bool


def extra_options_check(*, extra: dict[str, Any]) -> ExtraOptions:
    """The checked options; ``InvalidInput`` naming ``extra.<key>`` for anything not allowed."""
    problem = json_shape_problem(extra, max_depth=3, max_nodes=1000, max_string=1000)
    if problem is not None or len(extra) > MAX_EXTRA_KEYS:
        reason = problem or f"has more than {MAX_EXTRA_KEYS} keys"
        raise InvalidInput(EXTRA_TOO_LARGE.format(reason=reason), data={"field": "extra"})
    options: dict[str, Any] = {}
    for key, value in extra.items():
        # The key is the caller's: shown bounded, and only once it is known to be one of ours.
        check = _ALLOWED.get(key)
        if check is None:
            shown = key[:40].encode("unicode_escape").decode("ascii")
            raise InvalidInput(
                EXTRA_NOT_ALLOWED.format(key=shown, allowed=", ".join(ALLOWED_EXTRA)),
                data={"field": f"extra.{shown}"},
            )
        refusal = check(value)
        if refusal is not None:
            raise InvalidInput(EXTRA_INVALID.format(key=key, reason=refusal), data={"field": f"extra.{key}"})
        options[key] = value
    json_mode = bool(options.pop("json_mode", False))
    return ExtraOptions(options=options, json_mode=json_mode)
