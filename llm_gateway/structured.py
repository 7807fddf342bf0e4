"""Structured output: the caller's JSON Schema checked and sent, and the model's answer held to it.

A schema is checked before anything is spent: it must be a JSON Schema (draft 2020-12), small and
shallow enough for a validator and a provider, and refer only to itself (a remote ``$ref`` would be
a fetch we never make). An object root without ``additionalProperties`` gets ``false``: a caller who
lists properties means those, and strict providers (OpenAI) refuse the schema otherwise.

A model that enforces schemas (``llm_gateway.capabilities``) gets it as ``response_format``; any
other gets an instruction prepended, and JSON mode where the provider has one. Either way the answer
is parsed (leniently: prose around it, code fences) and validated here, because "the provider
supports it" is not "the provider did it": a mismatch or an unparseable answer is
``StructuredOutputInvalid``, never a silent pass. Its data names the failing path and constraint,
never the output, which may hold what the prompt did.

``json_mode`` (``extra``) asks for JSON without a schema: the same instruction and lenient parse.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import json_repair
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from core.errors import InvalidInput, StructuredOutputInvalid
from core.json_bounds import MAX_JSON_DEPTH, JsonTooDeep, json_check_depth, json_loads_bounded
from llm_gateway.json_limits import json_shape_problem

SCHEMA_NOT_JSON_SCHEMA = "response_schema is not a valid JSON Schema: {reason}"
SCHEMA_TOO_LARGE = "response_schema {reason}."
SCHEMA_REMOTE_REF = "response_schema may only refer to itself ($ref starting with #)."
OUTPUT_NOT_JSON = "The model's answer is not JSON, though JSON was asked for."
OUTPUT_MISMATCH = "The model's answer does not match the response schema at {path}: {constraint}."

SCHEMA_INSTRUCTION = (
    "Reply with a single JSON value that matches this JSON Schema, and nothing else: no prose, no "
    "explanation, no code fences.\nJSON Schema:\n{schema}"
)
JSON_INSTRUCTION = (
    "Reply with a single JSON object and nothing else: no prose, no explanation, no code fences. "
    "Your whole reply must parse as JSON."
)

MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_NODES = 5000
MAX_SCHEMA_STRING = 2000
MAX_SCHEMA_CHARACTERS = 64_000
_SHOWN = 120


@dataclass(frozen=True)
class StructuredRequest:
    """What to send: the messages (an instruction prepended when emulating) and ``response_format``."""

    messages: list[dict[str, str]]
    response_format: dict[str, Any] | None
    native: bool


def response_schema_prepare(*, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema to send and validate against; ``InvalidInput`` (field ``response_schema``) if unusable."""
    problem = json_shape_problem(
        schema, max_depth=MAX_SCHEMA_DEPTH, max_nodes=MAX_SCHEMA_NODES, max_string=MAX_SCHEMA_STRING
    )
    if problem is None and len(json.dumps(schema)) > MAX_SCHEMA_CHARACTERS:
        problem = f"is longer than {MAX_SCHEMA_CHARACTERS} characters"
    if problem is not None:
        raise InvalidInput(SCHEMA_TOO_LARGE.format(reason=problem), data={"field": "response_schema"})
    if _has_remote_ref(schema):
        raise InvalidInput(SCHEMA_REMOTE_REF, data={"field": "response_schema"})
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise InvalidInput(
            SCHEMA_NOT_JSON_SCHEMA.format(reason=error.message[:_SHOWN]),
            data={"field": "response_schema", "path": _pointer(error.absolute_path)},
        ) from None
    prepared = dict(schema)
    if _is_object_root(prepared) and "additionalProperties" not in prepared:
        prepared["additionalProperties"] = False
    return prepared


def _strict_compatible(node: Any) -> bool:
    """Whether a provider's strict mode takes ``node`` (OpenAI's rule: every object lists all its
    properties as required and allows no others, at every depth). A schema with optional fields is
    still sent, without ``strict``: the provider follows it, and our validation holds the answer."""
    if isinstance(node, list):
        return all(_strict_compatible(item) for item in node)
    if not isinstance(node, dict):
        return True
    properties = node.get("properties")
    if isinstance(properties, dict) and (
        node.get("additionalProperties") is not False or set(node.get("required") or ()) != set(properties)
    ):
        return False
    return all(
        _strict_compatible(value) for key, value in node.items() if key not in ("enum", "const", "default")
    )


def structured_request_build(
    *,
    messages: list[dict[str, str]],
    schema: dict[str, Any] | None,
    json_mode: bool,
    structured_output: bool,
    native_json_mode: bool,
) -> StructuredRequest:
    """The messages and ``response_format`` for a call that asked for a schema or for JSON."""
    if schema is not None and structured_output:
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": schema, "strict": _strict_compatible(schema)},
        }
        return StructuredRequest(messages=messages, response_format=response_format, native=True)
    if schema is not None:
        instruction = SCHEMA_INSTRUCTION.format(schema=json.dumps(schema, ensure_ascii=False))
    elif json_mode:
        instruction = JSON_INSTRUCTION
    else:
        return StructuredRequest(messages=messages, response_format=None, native=False)
    # A schema that is not an object cannot go through JSON mode, which answers objects only.
    use_json_mode = native_json_mode and (schema is None or _is_object_root(schema))
    return StructuredRequest(
        messages=[{"role": "system", "content": instruction}, *messages],
        response_format={"type": "json_object"} if use_json_mode else None,
        native=False,
    )


def structured_output_parse(*, text: str, schema: dict[str, Any] | None, json_mode: bool) -> Any:
    """The answer: parsed JSON (held to ``schema`` if given) when JSON was asked for, else JSON when
    the text is an object or array, else the text."""
    if schema is None and not json_mode:
        return _plain_output(text)
    value = _lenient_json(text)
    if schema is not None:
        error = best_match(Draft202012Validator(schema).iter_errors(value))
        if error is not None:
            raise _mismatch(error)
    return value


def _plain_output(text: str) -> Any:
    # Only objects and arrays: an answer "42" or "true" is prose a model wrote, not data to retype.
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return text
    try:
        return json_loads_bounded(stripped, parse_constant=_no_constants)
    except ValueError:
        return text


def _lenient_json(text: str) -> Any:
    stripped = text.strip()
    try:
        return json_loads_bounded(stripped, parse_constant=_no_constants)
    except JsonTooDeep:
        raise StructuredOutputInvalid(OUTPUT_NOT_JSON, data={"reason": "too_deep"}) from None
    except ValueError:
        pass
    try:
        # json_repair recurses as it parses: the depth bound goes first.
        json_check_depth(stripped, max_depth=MAX_JSON_DEPTH)
        value = json_repair.loads(stripped)
    except (JsonTooDeep, RecursionError):
        raise StructuredOutputInvalid(OUTPUT_NOT_JSON, data={"reason": "too_deep"}) from None
    except Exception:
        raise StructuredOutputInvalid(OUTPUT_NOT_JSON, data={"reason": "not_json"}) from None
    # json_repair answers "" when it found no JSON at all, and lets NaN and Infinity through.
    if (value == "" and stripped != '""') or not _all_finite(value):
        raise StructuredOutputInvalid(OUTPUT_NOT_JSON, data={"reason": "not_json"})
    return value


def _all_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _no_constants(name: str) -> Any:
    # NaN and Infinity are not JSON: an answer holding them cannot be given back as JSON.
    raise ValueError(f"{name} is not JSON")


def _mismatch(error: ValidationError) -> StructuredOutputInvalid:
    path = _pointer(error.absolute_path)
    # The constraint comes from the schema (the caller's own), never from the output: jsonschema's
    # own message repeats the offending value.
    constraint = f"{error.validator} {json.dumps(error.validator_value, ensure_ascii=False)}"[:_SHOWN]
    return StructuredOutputInvalid(
        OUTPUT_MISMATCH.format(path=path, constraint=constraint),
        data={
            "reason": "schema_mismatch",
            "path": path,
            "keyword": str(error.validator),
            "schemaPath": _pointer(error.absolute_schema_path),
        },
    )


def _pointer(parts: Any) -> str:
    # Path segments of the output are keys the model wrote: bounded, and escaped as JSON Pointer.
    segments = [str(part)[:40].replace("~", "~0").replace("/", "~1") for part in list(parts)[:20]]
    return "/" + "/".join(segments) if segments else "/"


def _is_object_root(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind is None:
        return "properties" in schema
    return kind == "object" or (isinstance(kind, list) and kind == ["object"])


def _has_remote_ref(schema: dict[str, Any]) -> bool:
    stack: list[Any] = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in ("$ref", "$dynamicRef") and not (isinstance(value, str) and value.startswith("#")):
                    return True
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return False
