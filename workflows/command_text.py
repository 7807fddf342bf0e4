"""Command text written from typed values: the inverse of ``syntax.command_parse``, for the
assistant and the agent, which get parameters as JSON and run commands as text.

Nothing is escaped, because the syntax has no escape: a value holding its own closing tag
(``</name>``) cannot be carried, and is refused rather than cut short.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workflows.syntax import PARAMETER_NAME


class CommandTextError(ValueError):
    """Values that command text cannot carry; the message says which and why."""


def command_value_text(value: Any) -> str:
    """A JSON value as command text: booleans as true/false, objects and lists as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def command_text_build(*, qualified_name: str, arguments: Mapping[str, Any]) -> str:
    """``context/Name <p>value</p> ...`` for ``arguments`` (None values left out)."""
    parts = [qualified_name]
    for name, value in arguments.items():
        if value is None:
            continue
        if not isinstance(name, str) or not PARAMETER_NAME.match(name):
            raise CommandTextError(f"{str(name)[:40]!r} is not a valid parameter name.")
        text = command_value_text(value)
        if f"</{name}>" in text:
            raise CommandTextError(
                f"The value of {name} contains </{name}>, which the command syntax cannot carry."
            )
        parts.append(f"<{name}>{text}</{name}>")
    return " ".join(parts)
