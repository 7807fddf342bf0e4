"""``$ref`` inlined: a tool's input schema is one self-contained JSON Schema, since an MCP client
receives it alone, without the document its references point into.

References are looked up with ``referencing`` (the resolver behind ``jsonschema``), within the
document only (``document`` refuses any other). Inlining is bounded: a reference to itself, however
indirect, is refused (a cycle has no finite inlined form), and so is a schema that grows past
``MAX_NODES`` objects or ``MAX_DEPTH`` levels once inlined (a few references, each used twice by
the next, double at every level).

OpenAPI 3.0's schema dialect is brought to JSON Schema 2020-12 on the way, for what Gatehouse's
argument check reads: ``nullable`` becomes a ``null`` type, boolean ``exclusiveMinimum`` and
``exclusiveMaximum`` become numbers. Keywords of the document's dialect that say nothing about a
value (``example``, ``xml``, ``discriminator``, ``externalDocs``) are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012
from referencing.typing import URI

BASE = URI("urn:gatehouse:openapi-document")
MAX_DEPTH = 40
MAX_NODES = 5000
DROPPED = frozenset({"example", "xml", "discriminator", "externalDocs", "$schema", "$id", "$anchor"})
# Keywords whose value is data, not a schema: kept as written.
VALUES = frozenset({"enum", "const", "default", "examples"})
# Keywords whose value maps names (a property's, say) to schemas: its keys are not keywords.
NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


class SchemaRefused(Exception):
    """Why an operation's schema cannot be inlined: one constant sentence (the reference shown
    bounded), for ``tools`` to name the operation with."""


CYCLE = "its schema refers to itself through $ref {ref!r}, which has no finite inlined form"
TOO_LARGE = f"its schema is larger than {MAX_NODES} objects once its $refs are inlined"
TOO_DEEP = f"its schema is nested deeper than {MAX_DEPTH} levels once its $refs are inlined"
UNRESOLVED = "its $ref {ref!r} points nowhere in the document"


@dataclass
class Inliner:
    """One document's resolver, and the budget of the schema being inlined."""

    document: dict[str, Any]
    openapi_30: bool
    nodes: int = 0
    # referencing.Resolver, which the package does not export by name.
    _resolver: Any = field(init=False)

    def __post_init__(self) -> None:
        resource = DRAFT202012.create_resource(self.document)
        self._resolver = Registry().with_resource(BASE, resource).resolver(base_uri=BASE)

    def resolved(self, value: Any) -> Any:
        """An object that may be a ``{"$ref": ...}`` (a parameter, a request body), followed to
        what it names (through chains of references, not into the result)."""
        seen: list[str] = []
        while isinstance(value, dict) and isinstance(value.get("$ref"), str):
            ref = value["$ref"]
            if ref in seen:
                raise SchemaRefused(CYCLE.format(ref=ref[:120]))
            seen.append(ref)
            value = self._lookup(ref)
        return value

    def schema(self, value: Any) -> Any:
        """``value`` (a schema) with every ``$ref`` inlined, within the budget; starts a new one."""
        self.nodes = 0
        return self._inline(value, (), 0)

    def _lookup(self, ref: str) -> Any:
        try:
            return self._resolver.lookup(ref).contents
        except Unresolvable:
            raise SchemaRefused(UNRESOLVED.format(ref=ref[:120])) from None

    def _inline(self, value: Any, stack: tuple[str, ...], depth: int, *, names: bool = False) -> Any:
        if depth > MAX_DEPTH:
            raise SchemaRefused(TOO_DEEP)
        if isinstance(value, list):
            return [self._inline(item, stack, depth + 1) for item in value]
        if not isinstance(value, dict):
            return value
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise SchemaRefused(TOO_LARGE)
        if names:
            return {key: self._inline(item, stack, depth + 1) for key, item in value.items()}
        ref = value.get("$ref")
        if isinstance(ref, str):
            if ref in stack:
                raise SchemaRefused(CYCLE.format(ref=ref[:120]))
            target = self._inline(self._lookup(ref), (*stack, ref), depth + 1)
            siblings = {k: v for k, v in value.items() if k != "$ref"}
            if not siblings or self.openapi_30:
                # OpenAPI 3.0 ignores what stands beside a $ref.
                return target
            return {**target, **self._inline(siblings, stack, depth)} if isinstance(target, dict) else target
        inlined = {
            key: item if key in VALUES else self._inline(item, stack, depth + 1, names=key in NAMED_SCHEMAS)
            for key, item in value.items()
            if key not in DROPPED
        }
        return self._dialect(inlined) if self.openapi_30 else inlined

    @staticmethod
    def _dialect(schema: dict[str, Any]) -> dict[str, Any]:
        """OpenAPI 3.0's schema keywords as JSON Schema 2020-12 says them."""
        if schema.pop("nullable", False) is True:
            kind = schema.get("type")
            if isinstance(kind, str):
                schema["type"] = [kind, "null"]
            elif "enum" in schema and None not in schema["enum"]:
                schema["enum"] = [*schema["enum"], None]
        for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            flag = schema.get(exclusive)
            if isinstance(flag, bool):
                del schema[exclusive]
                if flag and bound in schema:
                    schema[exclusive] = schema.pop(bound)
        return schema
