"""Tools from an OpenAPI document's operations, generated once when the upstream is saved and stored
on it (``Upstream.openapi_tools``): the MCP listing entry (name, description, input schema,
annotations) and, under ``call``, what a call needs (method, path, where each argument goes).

Names. A tool is named by its operation's ``operationId``, which must already be a tool name: 1 to
64 ASCII letters, digits, ``_``, ``-`` and ``.`` (prefix included, when prefixing is on). An
operation without one is named from its method and path, each run of other characters as one ``_``
(``GET /pets/{petId}`` is ``get_pets_petId``). A document with an operationId outside that rule,
or two operations of one name, is refused, naming the operation: renaming silently would make the
tool a model sees differ from the operation its author documents.

Arguments. One per parameter (path, query, header), named as the parameter is, and ``body`` for a
JSON request body. When two parameters of an operation share a name (a path ``id`` and a query
``id``), or one is named ``body`` beside a request body, each such one is named ``<in>_<name>``
(``path_id``, ``query_id``). Cookie parameters are not sent (an operation that requires one is
left out, with the reason), nor ``Accept``, ``Content-Type`` and ``Authorization`` header
parameters, which OpenAPI itself says to ignore. An operation whose request body it requires is
not JSON is left out too.

No output schema is published: an API's error answers and non-object results would not match one,
and a client that checks results against it would refuse them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accounts.scopes import SCOPE_WRITE
from core.errors import InvalidInput
from core.text_safety import text_cleaned
from upstreams.openapi.document import FIELD, METHODS
from upstreams.openapi.refs import Inliner, SchemaRefused
from upstreams.validation import HEADER_NAME_PATTERN

MAX_TOOL_NAME = 64
MAX_TOOLS = 300
MAX_DESCRIPTION = 4000
SAFE_METHODS = frozenset({"get", "head", "options"})
LOCATIONS = ("path", "query", "header")
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
BODY = "body"
TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_NOT_NAME = re.compile(r"[^A-Za-z0-9]+")

BAD_OPERATION_ID = (
    "openapi_document: the operationId of {operation} is not a tool name: use 1 to {limit} ASCII "
    "letters, digits, '_', '-' and '.'."
)
NO_NAME = (
    "openapi_document: {operation} has no operationId, and its method and path make no tool name of "
    "at most {limit} ASCII characters; give it an operationId."
)
DUPLICATE_NAME = "openapi_document: {first} and {second} are both named {name!r}; tool names must differ."
TOO_MANY_TOOLS = (
    f"include_tools: {{count}} operations selected; Gatehouse serves at most {MAX_TOOLS} per upstream. "
    "Choose the operations to serve with include_tools."
)
SCHEMA_REFUSED = "openapi_document: {operation} ({name}): {reason}. Exclude it, or fix the document."
COOKIE_REQUIRED = "it needs a cookie parameter, which Gatehouse does not send"
BODY_NOT_JSON = "its request body must be {types}, and Gatehouse sends JSON only"
HEADER_NAME_INVALID = "one of its header parameters is not named as a header can be"
ARGUMENT_CLASH = "two of its parameters would both be the argument {argument!r}"
JSON_TYPE = re.compile(r"application/(?:[\w.+-]+\+)?json\s*(?:;.*)?$", re.IGNORECASE)


@dataclass
class GeneratedTools:
    tools: list[dict[str, Any]] = field(default_factory=list)
    # (tool name, why it is not served), for the configuration test to report.
    left_out: list[tuple[str, str]] = field(default_factory=list)


def operation_label(method: str, path: str) -> str:
    """``GET '/pets/{petId}'``: an operation as a refusal names it (the path escaped: it is the
    document's text, and may hold characters that hide or reorder what is shown)."""
    return f"{method.upper()} {path[:120]!a}"


def _derived_name(method: str, path: str) -> str:
    return f"{method}_{_NOT_NAME.sub('_', path).strip('_')}".rstrip("_")


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    found = []
    for path, item in (document.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            operation = item.get(method)
            if isinstance(operation, dict):
                found.append((method, str(path), item, operation))
    return found


def _named(
    document: dict[str, Any], limit: int
) -> list[tuple[str, str, str, dict[str, Any], dict[str, Any]]]:
    """Every operation with its tool name, the names checked; ``InvalidInput`` otherwise."""
    named = []
    seen: dict[str, str] = {}
    for method, path, item, operation in _operations(document):
        label = operation_label(method, path)
        operation_id = operation.get("operationId")
        if isinstance(operation_id, str):
            name = operation_id
            if not (TOOL_NAME.fullmatch(name) and name.isascii() and len(name) <= limit):
                raise InvalidInput(
                    BAD_OPERATION_ID.format(operation=label, limit=limit), data={"field": FIELD}
                )
        else:
            name = _derived_name(method, path)
            if not (TOOL_NAME.fullmatch(name) and name.isascii() and len(name) <= limit):
                raise InvalidInput(NO_NAME.format(operation=label, limit=limit), data={"field": FIELD})
        if name in seen:
            raise InvalidInput(
                DUPLICATE_NAME.format(first=seen[name], second=label, name=name), data={"field": FIELD}
            )
        seen[name] = label
        named.append((name, method, path, item, operation))
    return named


def openapi_operation_names(*, document: Any) -> list[str]:
    """Every operation's tool name, before the selection and any prefix: what an admin chooses
    from (``include_tools``). A stored document was checked when it was saved; anything else has
    no names to offer."""
    if not isinstance(document, dict):
        return []
    try:
        return [name for name, *_ in _named(document, MAX_TOOL_NAME)]
    except InvalidInput:
        return []


def _description(operation: dict[str, Any]) -> str:
    parts = [operation.get(key) for key in ("summary", "description")]
    text = "\n\n".join(part.strip() for part in parts if isinstance(part, str) and part.strip())
    return text_cleaned(text)[:MAX_DESCRIPTION]


class _LeftOut(Exception):
    pass


def _parameters(inliner: Inliner, item: dict[str, Any], operation: dict[str, Any]) -> list[dict[str, Any]]:
    """The operation's parameters, its path item's first (an operation's own replace those of the
    same name and location), references followed."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for source in (item.get("parameters"), operation.get("parameters")):
        for raw in source if isinstance(source, list) else ():
            parameter = inliner.resolved(raw)
            if isinstance(parameter, dict) and isinstance(parameter.get("name"), str):
                merged[(str(parameter.get("in")), parameter["name"])] = parameter
    return list(merged.values())


def _parameter_schema(inliner: Inliner, parameter: dict[str, Any]) -> dict[str, Any]:
    schema = parameter.get("schema")
    if schema is None and isinstance(parameter.get("content"), dict):
        media = next(iter(parameter["content"].values()), None)
        schema = media.get("schema") if isinstance(media, dict) else None
    inlined = inliner.schema(schema) if schema is not None else {}
    if not isinstance(inlined, dict):
        inlined = {}
    description = parameter.get("description")
    if isinstance(description, str) and description.strip() and "description" not in inlined:
        inlined = {**inlined, "description": text_cleaned(description)[:MAX_DESCRIPTION]}
    return inlined


def _body(inliner: Inliner, operation: dict[str, Any]) -> tuple[dict[str, Any], str, bool] | None:
    """The JSON request body's schema, media type and whether it is required; None without one."""
    body = inliner.resolved(operation.get("requestBody"))
    if not isinstance(body, dict) or not isinstance(body.get("content"), dict):
        return None
    required = body.get("required") is True
    for media_type, media in body["content"].items():
        if JSON_TYPE.match(str(media_type)):
            schema = media.get("schema") if isinstance(media, dict) else None
            inlined = inliner.schema(schema) if schema is not None else {}
            return (inlined if isinstance(inlined, dict) else {}), str(media_type), required
    if required:
        types = ", ".join(ascii(str(t)[:60]) for t in list(body["content"])[:3])
        raise _LeftOut(BODY_NOT_JSON.format(types=types))
    return None


def _tool(
    inliner: Inliner, name: str, method: str, path: str, item: dict[str, Any], operation: dict[str, Any]
) -> dict[str, Any]:
    parameters = []
    for parameter in _parameters(inliner, item, operation):
        location = parameter.get("in")
        if location == "cookie":
            if parameter.get("required") is True:
                raise _LeftOut(COOKIE_REQUIRED)
            continue
        if location == "header" and str(parameter["name"]).lower() in IGNORED_HEADERS:
            continue
        if location == "header" and not HEADER_NAME_PATTERN.fullmatch(parameter["name"]):
            raise _LeftOut(HEADER_NAME_INVALID)
        if location in LOCATIONS:
            parameters.append(parameter)
    body = _body(inliner, operation)
    counts: dict[str, int] = {}
    for parameter in parameters:
        counts[parameter["name"]] = counts.get(parameter["name"], 0) + 1
    properties: dict[str, Any] = {}
    required: list[str] = []
    call_parameters = []
    for parameter in parameters:
        argument = parameter["name"]
        if counts[argument] > 1 or (argument == BODY and body is not None):
            argument = f"{parameter['in']}_{argument}"
        if argument in properties:
            raise _LeftOut(ARGUMENT_CLASH.format(argument=argument[:60]))
        properties[argument] = _parameter_schema(inliner, parameter)
        # Path parameters are always required, whatever the document says.
        if parameter.get("required") is True or parameter["in"] == "path":
            required.append(argument)
        style = parameter.get("style") or ("simple" if parameter["in"] in ("path", "header") else "form")
        call_parameters.append(
            {
                "name": parameter["name"],
                "in": parameter["in"],
                "argument": argument,
                "style": str(style),
                "explode": bool(parameter.get("explode", style == "form")),
            }
        )
    call_body = None
    if body is not None:
        schema, media_type, body_required = body
        if BODY in properties:
            raise _LeftOut(ARGUMENT_CLASH.format(argument=BODY))
        properties[BODY] = schema
        if body_required:
            required.append(BODY)
        call_body = {"argument": BODY, "contentType": media_type}
    input_schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        input_schema["required"] = required
    read_only = method in SAFE_METHODS
    annotations: dict[str, Any] = {"readOnlyHint": read_only, "openWorldHint": True}
    if not read_only:
        annotations["destructiveHint"] = method == "delete"
        annotations["idempotentHint"] = method in ("put", "delete")
    tool: dict[str, Any] = {"name": name, "inputSchema": input_schema, "annotations": annotations}
    description = _description(operation)
    if description:
        tool["description"] = description
    if isinstance(operation.get("summary"), str) and operation["summary"].strip():
        annotations["title"] = text_cleaned(operation["summary"].strip())[:200]
    tool["call"] = {
        "method": method.upper(),
        "path": path,
        "parameters": call_parameters,
        "body": call_body,
        "write": not read_only,
    }
    return tool


def openapi_tools_generate(
    *, document: dict[str, Any], selects: Callable[[str], bool], prefix: str = ""
) -> GeneratedTools:
    """The tools of ``document``'s operations that ``selects`` lets through (by tool name), each
    named so that ``prefix`` + its name is a tool name; ``InvalidInput`` for a document whose
    names break the rule, or whose selected operations Gatehouse cannot serve as tools."""
    limit = MAX_TOOL_NAME - len(prefix)
    named = _named(document, limit)
    chosen = [entry for entry in named if selects(entry[0])]
    if len(chosen) > MAX_TOOLS:
        raise InvalidInput(TOO_MANY_TOOLS.format(count=len(chosen)), data={"field": "include_tools"})
    inliner = Inliner(document=document, openapi_30=str(document.get("openapi", "")).startswith("3.0."))
    generated = GeneratedTools()
    for name, method, path, item, operation in chosen:
        try:
            generated.tools.append(_tool(inliner, name, method, path, item, operation))
        except _LeftOut as reason:
            generated.left_out.append((name, str(reason)))
        except SchemaRefused as refused:
            raise InvalidInput(
                SCHEMA_REFUSED.format(operation=operation_label(method, path), name=name, reason=refused),
                data={"field": FIELD},
            ) from None
    return generated


def openapi_listed(tools: Any) -> list[dict[str, Any]]:
    """The stored tools as an MCP ``tools/list`` has them: without what only a call reads."""
    return [
        {key: value for key, value in tool.items() if key != "call"}
        for tool in tools or ()
        if isinstance(tool, dict) and isinstance(tool.get("name"), str)
    ]


def openapi_write_scopes(tools: Any) -> dict[str, frozenset[str]]:
    """The scopes the stored tools that change data need beyond the upstream's, by tool name."""
    return {
        str(tool["name"]): frozenset({SCOPE_WRITE})
        for tool in tools or ()
        if isinstance(tool, dict) and isinstance(tool.get("call"), dict) and tool["call"].get("write")
    }
