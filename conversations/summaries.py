"""A conversation's topic and summary, written when the person moves to a new conversation.

With the tenant's model, one structured call writes both; anything short of a usable answer is
``Unavailable``, so the caller rotates nothing and the person can try again (a conversation with a
made-up summary would be worse than one still open). Without a model, both are derived from the
turns, the same way every time, and flagged as derived so the answer can say so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from core.errors import GatehouseError, NotReady, RateLimited, Timeout, Unavailable
from core.text_safety import text_cleaned
from language_models.governed import ModelUse, model_complete
from language_models.selectors import ModelConfig

PURPOSE = "conversation_summary"
TOPIC_MAX_CHARS = 80
SUMMARY_MAX_CHARS = 1_000
DERIVED_TOPIC_CHARS = 60
# What the model reads: the latest turns, each request bounded, so a long conversation stays cheap.
PROMPT_TURNS_MAX = 40
PROMPT_REQUEST_MAX_CHARS = 300

EMPTY_TOPIC = "Empty conversation"
EMPTY_SUMMARY = "No turns."
SUMMARY_FAILED = "The language model could not write this conversation's summary; try again shortly."
SUMMARY_BAD = "The language model's summary of this conversation could not be used; try again shortly."

SYSTEM_PROMPT = """You name and summarise a person's conversation with a workflow, for their list of
conversations. Answer with one JSON object only: {"topic": "...", "summary": "..."}.
The topic: a few words, at most 80 characters, one line. The summary: at most three sentences
saying what the person asked and what was done."""


async def conversation_summary_write(
    *, use: ModelUse, config: ModelConfig | None, turns: Sequence[dict[str, Any]]
) -> tuple[str, str, bool]:
    """``(topic, summary, derived)`` for ``turns`` (dicts with kind, request, command_name, success,
    oldest first): written by the model when ``config`` is given, else derived (``derived`` True).

    A model that fails or answers unusably raises ``Unavailable`` (its ``NotReady``/``Timeout``
    kept as they are).
    """
    if not turns:
        return EMPTY_TOPIC, EMPTY_SUMMARY, True
    if config is None:
        topic, summary = _derived(turns)
        return topic, summary, True
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": _turns_text(turns)},
    ]
    try:
        completion = await model_complete(
            use=use,
            config=config,
            messages=messages,
            purpose=PURPOSE,
            response_format={"type": "json_object"},
        )
    except (NotReady, Unavailable, Timeout, RateLimited):
        # RateLimited: a spent budget or the model-call limit, refused as for every feature.
        raise
    except GatehouseError as error:
        raise Unavailable(SUMMARY_FAILED, data={"reason": "llm_summary_failed"}) from error
    topic, summary = _parsed(completion.text)
    return topic, summary, False


def _parsed(answer: str) -> tuple[str, str]:
    fenced = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", answer, re.DOTALL)
    try:
        parsed = json.loads(fenced.group(1) if fenced else answer)
    except (ValueError, RecursionError):
        parsed = None
    topic = parsed.get("topic") if isinstance(parsed, dict) else None
    summary = parsed.get("summary") if isinstance(parsed, dict) else None
    if isinstance(topic, str) and isinstance(summary, str):
        topic = _one_line(topic)[:TOPIC_MAX_CHARS].strip()
        summary = text_cleaned(summary).strip()[:SUMMARY_MAX_CHARS].strip()
        if topic and summary:
            return topic, summary
    raise Unavailable(SUMMARY_BAD, data={"reason": "llm_bad_summary"})


def _one_line(text: str) -> str:
    return " ".join(text_cleaned(text).split())


def _derived(turns: Sequence[dict[str, Any]]) -> tuple[str, str]:
    first = _one_line(str(turns[0].get("request") or ""))
    topic = _shortened(first, DERIVED_TOPIC_CHARS) or f"{len(turns)} turns"
    commands: list[str] = []
    for turn in turns:
        name = _one_line(str(turn.get("command_name") or ""))
        if name and name not in commands:
            commands.append(name)
    count = f"{len(turns)} turn" + ("" if len(turns) == 1 else "s")
    summary = (
        f"{count}: first request '{_shortened(first, 200)}'; commands run: {', '.join(commands) or 'none'}"
    )
    return topic, summary[:SUMMARY_MAX_CHARS]


def _shortened(text: str, limit: int) -> str:
    """``text`` cut at a word boundary within ``limit`` characters, with an ellipsis when cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.") + "…"


def _turns_text(turns: Sequence[dict[str, Any]]) -> str:
    lines = []
    for turn in list(turns)[-PROMPT_TURNS_MAX:]:
        request = _one_line(str(turn.get("request") or ""))[:PROMPT_REQUEST_MAX_CHARS]
        outcome = "ok" if turn.get("success") else "failed"
        command = _one_line(str(turn.get("command_name") or "")) or "no command"
        lines.append(f"- {turn.get('kind') or 'turn'}: {request!r} -> {command} ({outcome})")
    if len(turns) > PROMPT_TURNS_MAX:
        lines.insert(0, f"(the last {PROMPT_TURNS_MAX} of {len(turns)} turns)")
    return "Turns, oldest first:\n" + "\n".join(lines)
