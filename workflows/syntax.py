"""The command syntax, ``context/Name <param>value</param> ...``, and the rules for names and values.

One parser for examples in a workflow file now and for ``execute_command`` later, so an example
that validates is exactly a command that runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Any

CONTEXT_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}\Z")
COMMAND_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,62}\Z")
PARAMETER_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}\Z")
CONTEXT_NAME_RULE = "a lowercase letter, then up to 62 lowercase letters, digits or underscores"
COMMAND_NAME_RULE = "a letter, then up to 62 letters, digits or underscores"
PARAMETER_NAME_RULE = CONTEXT_NAME_RULE
PARAMETER_TYPES = ("string", "integer", "number", "boolean", "date")
COMMAND_MAX_CHARS = 4_000
EXPECTED_FORM = "context/Name <param>value</param> ..."
# Every context has these commands; a workflow's own command may not take their names.
BUILTIN_NAMES = ("what_is_current_context", "go_to_context", "list_commands")

_HEAD = re.compile(r"\s*([^\s/<]+)/([^\s<]+)")
_PARAMETER = re.compile(r"\s*<([a-z][a-z0-9_]{0,62})>(.*?)</\1>", re.DOTALL)


class CommandSyntaxError(ValueError):
    """A command text that does not follow the syntax; the message says what and where."""


@dataclass(frozen=True)
class ParsedCommand:
    context: str
    name: str
    arguments: dict[str, str]

    @property
    def qualified_name(self) -> str:
        return f"{self.context}/{self.name}"


def command_parse(*, text: str) -> ParsedCommand:
    """``text`` split into its qualified name and raw (string) argument values."""
    if len(text) > COMMAND_MAX_CHARS:
        raise CommandSyntaxError(f"The command is longer than {COMMAND_MAX_CHARS} characters.")
    head = _HEAD.match(text)
    if head is None:
        raise CommandSyntaxError(f"The command must start with context/Name; expected {EXPECTED_FORM}.")
    context, name = head.groups()
    if not CONTEXT_NAME.match(context) or not COMMAND_NAME.match(name):
        raise CommandSyntaxError(f"{context}/{name} is not a valid command name; expected {EXPECTED_FORM}.")
    arguments: dict[str, str] = {}
    position = head.end()
    while text[position:].strip():
        match = _PARAMETER.match(text, position)
        if match is None:
            raise CommandSyntaxError(
                f"Unexpected text at character {position + 1}: {text[position:].strip()[:40]!r};"
                f" expected <param>value</param>."
            )
        key, value = match.groups()
        if key in arguments:
            raise CommandSyntaxError(f"The parameter {key} is given twice.")
        arguments[key] = value
        position = match.end()
    return ParsedCommand(context=context, name=name, arguments=arguments)


def value_coerce(*, raw: str, type_name: str) -> Any:
    """``raw`` as the declared type; ValueError names the type expected."""
    text = raw.strip()
    if type_name == "string":
        return raw
    if type_name == "integer" and re.fullmatch(r"[+-]?\d{1,18}", text):
        return int(text)
    if type_name == "number" and re.fullmatch(r"[+-]?(\d{1,18}(\.\d{0,18})?|\.\d{1,18})", text):
        return float(text)
    if type_name == "boolean" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if type_name == "date" and re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
    raise ValueError(f"{raw[:40]!r} is not a valid {type_name}")
