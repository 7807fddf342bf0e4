"""The chat messages of a tool loop, in the shape litellm passes to every provider: the model's
turn that called tools, and each tool's answer bounded, so that one answer cannot fill the
context window. Shared by every loop that lets a model call tools (the workflow agent, the LLM
gateway's MCP tools)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from language_models.completion import ToolCall

TOOL_RESULT_MAX_CHARS = 8_000


def tool_calls_message(text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The assistant's turn that asked for ``calls``, to send back with their answers."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
            }
            for call in calls
        ],
    }


def tool_result_message(call: ToolCall, text: str) -> dict[str, Any]:
    """A tool's answer to ``call``, cut at ``TOOL_RESULT_MAX_CHARS`` with a note saying so."""
    if len(text) > TOOL_RESULT_MAX_CHARS:
        text = text[:TOOL_RESULT_MAX_CHARS] + f"\n[cut: {len(text) - TOOL_RESULT_MAX_CHARS} more characters]"
    return {"role": "tool", "tool_call_id": call.id, "content": text}
