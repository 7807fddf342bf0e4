"""The few plain-ASGI HTTP helpers the middleware layers share."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.types import Scope, Send


def request_header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (``name`` in lower case, as ASGI delivers it)."""
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def send_json(
    send: Send, *, status: int, body: dict[str, Any], headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    payload = json.dumps(body).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*raw_headers, *headers]})
    await send({"type": "http.response.body", "body": payload})
