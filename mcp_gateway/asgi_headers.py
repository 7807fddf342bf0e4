from __future__ import annotations

from starlette.types import Scope


def request_header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (``name`` in lower case, as ASGI delivers it)."""
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None
