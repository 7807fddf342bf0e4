"""An OpenAPI document, from the bytes a person uploaded or Gatehouse fetched, to the validated JSON
stored on the upstream: or a refusal that says, in one constant sentence, what is wrong with it.

A document comes from outside, so every step is bounded before it is attempted: its size before it
is parsed, YAML without aliases (an alias is how a few kilobytes expand to gigabytes: the "billion
laughs"), its operations counted before the validator walks them, and ``$ref`` limited to the
document itself. The last matters because the validator's own resolver would fetch any ``http``,
``https`` or ``file`` reference it is given: from Gatehouse's machine, past the egress rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml
from openapi_spec_validator import OpenAPIV30SpecValidator, OpenAPIV31SpecValidator
from referencing.exceptions import Unresolvable

from core.errors import InvalidInput
from core.text_safety import text_cleaned, text_unstorable_reason

FIELD = "openapi_document"
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
# A document with more operations than this is refused outright, whatever the selection: the
# validator and the name checks walk every one of them.
MAX_OPERATIONS = 1000
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

TOO_BIG = f"openapi_document: larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MB."
EMPTY = "openapi_document: empty."
NOT_UTF8 = "openapi_document: not UTF-8 text."
NOT_PARSED = "openapi_document: neither JSON nor YAML ({reason})."
YAML_ALIAS = "openapi_document: YAML aliases (*name) are not accepted; write the document out in full."
TOO_DEEP = "openapi_document: nested too deeply."
NOT_OBJECT = "openapi_document: the document must be an object (a mapping) at its top."
UNSTORABLE = "openapi_document: it {reason}."
SWAGGER_2 = (
    "openapi_document: this is a Swagger 2.0 document; Gatehouse reads OpenAPI 3.0 and 3.1. "
    "Convert it first (for example with swagger2openapi)."
)
NOT_OPENAPI = (
    "openapi_document: not an OpenAPI 3.0 or 3.1 document (its 'openapi' field must be 3.0.x or 3.1.x)."
)
INVALID = "openapi_document: not a valid OpenAPI document: {error}"
EXTERNAL_REF = (
    "openapi_document: $ref {ref!r} points outside the document; only references within it "
    "('#/components/...') are followed."
)
TOO_MANY_OPERATIONS = (
    f"openapi_document: more than {MAX_OPERATIONS} operations; Gatehouse reads documents of at most "
    "that many."
)
NO_PATHS = "openapi_document: it describes no operations (no paths)."
MAX_ERROR = 300


def _refuse(message: str) -> InvalidInput:
    return InvalidInput(message, data={"field": FIELD})


# libyaml's parser and composer when PyYAML was built with it (a 2 MB document in seconds rather
# than tens of seconds), its safe constructor either way.
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):
    """The safe loader, dates and times left as the strings they were written as (the document
    is stored as JSON)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml(text: str) -> Any:
    # Aliases are refused from the events, before any node is built: an alias bomb never expands.
    for event in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise _refuse(YAML_ALIAS)
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader)


def _decoded(content: str | bytes) -> str:
    if isinstance(content, bytes):
        if len(content) > MAX_DOCUMENT_BYTES:
            raise _refuse(TOO_BIG)
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise _refuse(NOT_UTF8) from None
    else:
        text = content
        if len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
            raise _refuse(TOO_BIG)
    if not text.strip():
        raise _refuse(EMPTY)
    return text


def _loaded(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise _refuse(TOO_DEEP) from None
    except ValueError:
        pass
    try:
        return _yaml(text)
    except RecursionError:
        raise _refuse(TOO_DEEP) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "unreadable"
        problem = str(getattr(error, "problem", "") or "").strip()[:80]
        raise _refuse(NOT_PARSED.format(reason=f"{where}: {problem}" if problem else where)) from None


def _as_json(value: Any) -> Any:
    """``value`` as JSON would hold it: YAML's integer keys (``200:`` under ``responses``) as
    strings, and anything else JSON has no type for as its text."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (RecursionError, ValueError):
        raise _refuse(TOO_DEEP) from None


def _refs(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                yield ref
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def operations_count(document: dict[str, Any]) -> int:
    paths = document.get("paths")
    if not isinstance(paths, dict):
        return 0
    return sum(1 for item in paths.values() if isinstance(item, dict) for method in METHODS if method in item)


class _LocalOnly:
    """In place of the validator's URL and file handlers: nothing outside the document is read."""

    def __call__(self, uri: str) -> Any:
        raise _refuse(EXTERNAL_REF.format(ref=uri[:200]))


_NO_HANDLERS: Any = {
    "<all_urls>": _LocalOnly(),
    "http": _LocalOnly(),
    "https": _LocalOnly(),
    "file": _LocalOnly(),
}


class _V30Validator(OpenAPIV30SpecValidator):
    resolver_handlers = _NO_HANDLERS


class _V31Validator(OpenAPIV31SpecValidator):
    resolver_handlers = _NO_HANDLERS


def _validate(document: dict[str, Any]) -> None:
    version = document.get("openapi")
    if "swagger" in document:
        raise _refuse(SWAGGER_2)
    if not isinstance(version, str):
        raise _refuse(NOT_OPENAPI)
    if version.startswith("3.0."):
        validator: OpenAPIV30SpecValidator | OpenAPIV31SpecValidator = _V30Validator(document)
    elif version.startswith("3.1."):
        validator = _V31Validator(document)
    else:
        raise _refuse(NOT_OPENAPI)
    for ref in _refs(document):
        if not ref.startswith("#"):
            raise _refuse(EXTERNAL_REF.format(ref=ref[:200]))
    if operations_count(document) > MAX_OPERATIONS:
        raise _refuse(TOO_MANY_OPERATIONS)
    try:
        error = next(iter(validator.iter_errors()), None)
    except InvalidInput:
        raise
    except Unresolvable as unresolvable:
        error = f"$ref {str(getattr(unresolvable, 'ref', '') or unresolvable)[:200]!r} cannot be resolved"
    except RecursionError:
        raise _refuse(TOO_DEEP) from None
    except Exception as failure:
        # The validator's own failure on a document it could not walk: said, never a 500.
        error = f"{type(failure).__name__}: {str(failure)[:200]}"
    if error is not None:
        message = getattr(error, "message", None) or str(error)
        path = "/".join(str(part) for part in getattr(error, "path", ()) or ())
        # The document's own text may be quoted: without what would hide or reorder it.
        text = text_cleaned(" ".join((f"{message} (at {path})" if path else message).split()))
        raise _refuse(INVALID.format(error=text[:MAX_ERROR]))
    if operations_count(document) == 0:
        raise _refuse(NO_PATHS)


def openapi_document_parse(*, content: str | bytes) -> dict[str, Any]:
    """The OpenAPI 3.0 or 3.1 document in ``content`` (JSON or YAML, UTF-8), validated, as JSON;
    ``InvalidInput`` (data ``{"field": "openapi_document"}``) saying why it is refused."""
    loaded = _loaded(_decoded(content))
    if not isinstance(loaded, dict):
        raise _refuse(NOT_OBJECT)
    document = _as_json(loaded)
    reason = text_unstorable_reason(document)
    if reason is not None:
        raise _refuse(UNSTORABLE.format(reason=reason))
    _validate(document)
    return document
