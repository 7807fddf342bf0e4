"""The LLM script player: answers every model call from a JSON file, for tests.

With ``GATEHOUSE["LLM_MOCK_RESPONSES_FILE"]`` set, ``language_models.completion`` imports this module
(then, and only then) and passes what ``llm_script_arguments`` returns to litellm, whose own
``mock_response`` answers: litellm's real code path runs and no network is used. The file is read at
call time::

    {"responses": {"<purpose>": "text" | ["first", "second", ...] | {"error": "RateLimitError"}},
     "delaySeconds": {"<purpose>": 1.5}}

A list is consumed in order, one item per call (the file is rewritten without it) and its last item
answers every later call. An item may also ask for tool calls, answered through litellm's own
``mock_tool_calls``::

    {"toolCalls": [{"name": "catalogue__ListProducts", "arguments": {"category": "Books"}}],
     "text": "optional text alongside the calls"}

Each call gets an id (``call_<purpose>_<n>``); ``arguments`` is an object, or a string sent as is
(to script a model that writes malformed JSON).

``{"error": "<litellm exception class>"}`` (see ``SCRIPTABLE_ERRORS``) makes litellm raise that
exception, to exercise ``completion``'s translation. The consumption is
guarded by a lock in this process only: scripts are for one server process.

Never in a deployment: settings refuse the file unless ``PUBLIC_URL`` is loopback, and
``manage.py check --deploy`` reports it as an error (``language_models.checks``).

A product module rather than a file under ``tests/``: the servers the end-to-end tests start (Daphne
subprocesses) and a developer's loopback server load it through the product's own import, and an
app must not import the test suite, which sits above every layer and which a deployment need not
ship. Keeping it apart from ``completion`` keeps it out of every server that has no script.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from core.errors import GatehouseError

MOCK_SCRIPT_UNREADABLE = "The LLM mock script {path} cannot be read: {error}"
MOCK_SCRIPT_LACKS_PURPOSE = "The LLM mock script {path} has no response for the purpose {purpose!r}."
MOCK_SCRIPT_BAD_ENTRY = (
    "The LLM mock script {path} has an invalid response for the purpose {purpose!r}: use a string, "
    '{{"toolCalls": [{{"name": NAME, "arguments": {{...}}}}], "text": TEXT}}, a non-empty list of '
    'them, or {{"error": NAME}} with NAME one of {names}; a delay is a number of seconds.'
)

# litellm exceptions a mock script may raise, and the arguments each one's constructor needs.
SCRIPTABLE_ERRORS = (
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "BadRequestError",
    "ContextWindowExceededError",
    "PaymentRequiredError",
    "ServiceUnavailableError",
    "InternalServerError",
    "BadGatewayError",
    "APIError",
)


class LlmMockScriptError(GatehouseError):
    """The test hook's script cannot answer this call (never raised outside tests)."""


_mock_script_lock = threading.Lock()
# Tool call ids must be unique within a conversation: a process-wide counter is enough for tests.
_call_ids = itertools.count(1)


async def llm_script_arguments(litellm: ModuleType, *, path: str, purpose: str, model: str) -> dict[str, Any]:
    """litellm's ``mock_response`` (and ``mock_delay``) for this call, consuming its scripted item.

    Raises ``LlmMockScriptError`` when the script cannot answer ``purpose``.
    """
    item, delay = await asyncio.to_thread(_mock_next, path=path, purpose=purpose)
    return _mock_arguments(litellm, item=item, delay=delay, model=model, path=path, purpose=purpose)


def _mock_next(*, path: str, purpose: str) -> tuple[Any, Any]:
    """The scripted item and delay for this call, consuming a list's first item."""
    with _mock_script_lock:
        try:
            script = json.loads(Path(path).read_text(encoding="utf-8"))
            responses = script["responses"]
            delays = script.get("delaySeconds") or {}
            if not isinstance(responses, dict) or not isinstance(delays, dict):
                raise TypeError("responses and delaySeconds must be JSON objects")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LlmMockScriptError(MOCK_SCRIPT_UNREADABLE.format(path=path, error=exc)) from None
        if purpose not in responses:
            raise LlmMockScriptError(MOCK_SCRIPT_LACKS_PURPOSE.format(path=path, purpose=purpose))
        entry = responses[purpose]
        if isinstance(entry, list):
            if not entry:
                raise _bad_entry(path=path, purpose=purpose)
            item = entry[0]
            if len(entry) > 1:
                responses[purpose] = entry[1:]
                _write_atomically(Path(path), script)
        else:
            item = entry
    return item, delays.get(purpose)


def _write_atomically(path: Path, script: dict[str, Any]) -> None:
    # A reader (another call, the test itself) sees the old script or the new one, never half of one.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        json.dump(script, file, indent=2)
    os.replace(temporary, path)


def _bad_entry(*, path: str, purpose: str) -> LlmMockScriptError:
    return LlmMockScriptError(
        MOCK_SCRIPT_BAD_ENTRY.format(path=path, purpose=purpose, names=", ".join(SCRIPTABLE_ERRORS))
    )


def _mock_arguments(
    litellm: ModuleType, *, item: Any, delay: Any, model: str, path: str, purpose: str
) -> dict[str, Any]:
    """litellm's ``mock_response`` (and ``mock_delay``) for a scripted item."""
    response: Any
    arguments: dict[str, Any] = {}
    if isinstance(item, str):
        response = item
    elif isinstance(item, dict) and "toolCalls" in item:
        response, arguments["mock_tool_calls"] = _scripted_tool_calls(item, path=path, purpose=purpose)
    elif isinstance(item, dict) and set(item) == {"error"} and item["error"] in SCRIPTABLE_ERRORS:
        response = _scripted_exception(litellm, item["error"], model=model)
    else:
        raise _bad_entry(path=path, purpose=purpose)
    arguments["mock_response"] = response
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
            raise _bad_entry(path=path, purpose=purpose)
        arguments["mock_delay"] = float(delay)
    return arguments


def _scripted_tool_calls(
    item: dict[str, Any], *, path: str, purpose: str
) -> tuple[str, list[dict[str, Any]]]:
    """The text and litellm ``mock_tool_calls`` of a ``{"toolCalls": [...], "text": ...}`` item."""
    calls = item["toolCalls"]
    text = item.get("text", "")
    if (
        set(item) - {"toolCalls", "text"}
        or not isinstance(text, str)
        or not isinstance(calls, list)
        or not calls
    ):
        raise _bad_entry(path=path, purpose=purpose)
    mock_calls: list[dict[str, Any]] = []
    for call in calls:
        if (
            not isinstance(call, dict)
            or set(call) - {"name", "arguments"}
            or not isinstance(call.get("name"), str)
        ):
            raise _bad_entry(path=path, purpose=purpose)
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str | dict):
            raise _bad_entry(path=path, purpose=purpose)
        mock_calls.append(
            {
                "id": f"call_{purpose}_{next(_call_ids)}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    return text, mock_calls


def _scripted_exception(litellm: ModuleType, name: str, *, model: str) -> Exception:
    import httpx

    cls = getattr(litellm.exceptions, name)
    arguments: dict[str, Any] = {"message": f"scripted {name}", "llm_provider": "mock", "model": model}
    if name == "PermissionDeniedError":
        request = httpx.Request("POST", "https://mock.invalid/v1/chat/completions")
        arguments["response"] = httpx.Response(403, request=request)
    elif name == "APIError":
        arguments["status_code"] = 500
    exception: Exception = cls(**arguments)
    return exception
