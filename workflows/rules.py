"""What a valid workflow is: bounds, names, parameters, examples and actions.

Each function returns the list of what is wrong (empty when valid) so the importer can attach its
line number to every message and the models' ``clean`` can attach them to fields.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError

from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from data_agent.models import Ontology
from data_agent.sql_gate import sql_gate_check
from mcp_gateway.kernel.registry import default_registry
from workflows import syntax

NAME_MAX_CHARS = 200
TEXT_MAX_CHARS = 4_000
SQL_MAX_CHARS = 20_000
PARAMETERS_MAX = 30
EXAMPLES_MAX = 20
DEFAULT_MAX_CHARS = 1_000
PARAMETER_KEYS = frozenset({"name", "type", "required", "description", "default"})
ONTOLOGY_UNKNOWN = "No such ontology in this tenant."
# :name, but not PostgreSQL's ::type casts nor a colon inside a word.
SQL_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


def raise_if_any(errors: dict[str, list[str]]) -> None:
    found = {field: messages for field, messages in errors.items() if messages}
    if found:
        raise ValidationError(found)


def text_errors(value: Any, *, max_chars: int = TEXT_MAX_CHARS) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string"]
    if len(value) > max_chars:
        return [f"is longer than {max_chars} characters"]
    reason = text_unstorable_reason(value)
    return [reason] if reason else []


def title_errors(value: Any) -> list[str]:
    errors = text_errors(value, max_chars=NAME_MAX_CHARS)
    if not errors and not value.strip():
        errors.append("must not be empty")
    return errors


def _name_errors(value: Any, pattern: re.Pattern[str], rule: str) -> list[str]:
    if not isinstance(value, str):
        return ["must be a string"]
    if not pattern.match(value):
        return [f"{value[:70]!r} is not a valid name: {rule}"]
    return []


def context_name_errors(value: Any) -> list[str]:
    return _name_errors(value, syntax.CONTEXT_NAME, syntax.CONTEXT_NAME_RULE)


def command_name_errors(value: Any) -> list[str]:
    errors = _name_errors(value, syntax.COMMAND_NAME, syntax.COMMAND_NAME_RULE)
    # Case aside too: ``List_Commands`` beside ``list_commands`` would only confuse whoever reads it.
    if not errors and value.lower() in syntax.BUILTIN_NAMES:
        errors.append(f"{value} is the name of a built-in command every context has")
    return errors


def parameter_errors(value: Any) -> list[str]:
    """One parameter's problems: {name, type, required, description, default}."""
    if not isinstance(value, dict):
        return ["a parameter must be a mapping of name, type, required, description, default"]
    errors = [f"unknown key {str(key)[:70]!r}" for key in value if key not in PARAMETER_KEYS]
    if "name" not in value:
        errors.append("a parameter needs a name")
    else:
        errors += [
            f"name {e}"
            for e in _name_errors(value["name"], syntax.PARAMETER_NAME, syntax.PARAMETER_NAME_RULE)
        ]
    type_name = value.get("type", "string")
    if type_name not in syntax.PARAMETER_TYPES:
        errors.append(f"type must be one of {', '.join(syntax.PARAMETER_TYPES)}")
    if not isinstance(value.get("required", False), bool):
        errors.append("required must be true or false")
    errors += [f"description {e}" for e in text_errors(value.get("description", ""))]
    default = value.get("default")
    if default is not None and type_name in syntax.PARAMETER_TYPES:
        if isinstance(default, bool) or not isinstance(default, (str, int, float)):
            if not (type_name == "boolean" and isinstance(default, bool)):
                errors.append(f"default must be a {type_name}")
        else:
            text = str(default)
            errors += [f"default {e}" for e in text_errors(text, max_chars=DEFAULT_MAX_CHARS)]
            if not errors:
                try:
                    syntax.value_coerce(raw=text, type_name=type_name)
                except ValueError as exc:
                    errors.append(f"default: {exc}")
    return errors


def parameters_errors(value: Any) -> list[str]:
    if not isinstance(value, list):
        return ["parameters must be a list"]
    if len(value) > PARAMETERS_MAX:
        return [f"a command has at most {PARAMETERS_MAX} parameters"]
    errors = [f"parameter {i + 1}: {e}" for i, item in enumerate(value) for e in parameter_errors(item)]
    names = [item.get("name") for item in value if isinstance(item, dict)]
    errors += [
        f"parameter {n!r} is declared twice"
        for n in sorted({n for n in names if names.count(n) > 1}, key=str)
    ]
    return errors


def example_errors(example: Any, *, qualified_name: str, parameters: list[dict[str, Any]]) -> list[str]:
    """One example, parsed as a command would be: it must name this command and its parameters."""
    errors = text_errors(example, max_chars=syntax.COMMAND_MAX_CHARS)
    if errors:
        return [f"example {e}" for e in errors]
    try:
        parsed = syntax.command_parse(text=example)
    except syntax.CommandSyntaxError as exc:
        return [f"example {example[:70]!r}: {exc}"]
    if parsed.qualified_name != qualified_name:
        return [f"example {example[:70]!r} names {parsed.qualified_name}, not {qualified_name}"]
    declared = {p["name"]: p for p in parameters}
    for key, raw in parsed.arguments.items():
        if key not in declared:
            errors.append(f"example {example[:70]!r} gives {key}, which {qualified_name} does not declare")
            continue
        try:
            syntax.value_coerce(raw=raw, type_name=declared[key].get("type", "string"))
        except ValueError as exc:
            errors.append(f"example {example[:70]!r}: {key}: {exc}")
    missing = [n for n, p in declared.items() if p.get("required") and n not in parsed.arguments]
    if missing:
        errors.append(f"example {example[:70]!r} lacks the required {', '.join(missing)}")
    return errors


def examples_errors(value: Any, *, qualified_name: str, parameters: list[dict[str, Any]]) -> list[str]:
    if not isinstance(value, list):
        return ["examples must be a list"]
    if len(value) > EXAMPLES_MAX:
        return [f"a command has at most {EXAMPLES_MAX} examples"]
    return [
        e
        for item in value
        for e in example_errors(item, qualified_name=qualified_name, parameters=parameters)
    ]


def tool_name_errors(value: Any) -> list[str]:
    if not isinstance(value, str) or not value:
        return ["a tool command names its tool"]
    if default_registry().get(value) is None:
        return [f"no tool named {value[:70]!r} in this deployment"]
    return []


def tool_arguments_errors(value: Any, *, parameters: list[dict[str, Any]]) -> list[str]:
    if not isinstance(value, dict):
        return ["arguments must map each tool argument to a parameter name"]
    declared = {p["name"] for p in parameters}
    errors = []
    for argument, parameter in value.items():
        if not isinstance(argument, str) or not syntax.PARAMETER_NAME.match(argument):
            errors.append(f"argument {str(argument)[:70]!r} is not a valid name")
        elif parameter not in declared:
            errors.append(
                f"argument {argument} is filled from {str(parameter)[:70]!r}, which is not a parameter"
            )
    return errors


def sql_errors(value: Any, *, parameters: list[dict[str, Any]]) -> list[str]:
    errors = text_errors(value, max_chars=SQL_MAX_CHARS)
    if errors:
        return [f"sql {e}" for e in errors]
    if not value.strip():
        return ["a query command needs its SQL"]
    declared = {p["name"] for p in parameters}
    unknown = sorted({name for name in SQL_PARAMETER.findall(value) if name not in declared})
    return [f"the SQL binds :{name}, which is not a parameter" for name in unknown]


def sql_gate_errors(sql: str, *, ontology: Ontology) -> list[str]:
    """What the SQL gate that will run the query says about it now: one read-only SELECT over the
    ontology's own tables, with allowed functions only."""
    tables = frozenset(ontology.datasets.values_list("source_table", flat=True))
    try:
        sql_gate_check(sql=sql, dialect=ontology.data_source.kind, allowed_tables=tables)
    except InvalidInput as exc:
        return [exc.message]
    return []
