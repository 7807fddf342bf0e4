"""HTTP 403 ``insufficient_scope`` for refusals the caller can cure by authorizing again.

A tool refused for missing scopes answers with JSON-RPC -32001 and ``data: {required, missing}``
in every case. Where re-authorizing can actually help, the HTTP response also says so, as RFC 6750
and the MCP authorization spec describe, so that clients step up on their own: status 403 and
``WWW-Authenticate: Bearer error="insufficient_scope", scope="…"``. That is where

* the person's role allows the missing scopes (a viewer asking for write access gets the JSON-RPC
  refusal alone: a new consent would not grant it), and
* the request stands alone (2026-07-28). A handshake-era session keeps the scopes it opened with, so
  a new token would not widen it; such a client opens a new session instead.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import ErrorData
from pydantic import ValidationError
from starlette.types import Message, Send

from accounts.scopes import scopes_for_role
from core.errors import InsufficientScope
from core.identity import Identity
from oauth.challenge import www_authenticate

STEP_UP = "This call needs more scopes than the access token carries; authorize again with these."


def step_up_challenge(*, identity: Identity, error: ErrorData) -> list[tuple[bytes, bytes]] | None:
    """The ``WWW-Authenticate`` header for a refusal re-authorizing would cure, or None."""
    data = error.data if isinstance(error.data, dict) else {}
    missing = data.get("missing")
    if error.code != InsufficientScope.jsonrpc_code or not isinstance(missing, list) or not missing:
        return None
    wanted = frozenset(str(scope) for scope in missing)
    if not wanted <= scopes_for_role(role=identity.role):
        return None
    header = www_authenticate(
        error="insufficient_scope", description=STEP_UP, scopes=identity.scopes | wanted
    )
    return [(b"www-authenticate", header.encode())]


def challenging_send(send: Send, *, identity: Identity) -> Send:
    """Wrap a stand-alone request's ``send`` so a curable scope refusal goes out as HTTP 403.

    Only plain JSON answers can change status: the start is held back until the body shows whether
    it is such a refusal. Streamed (SSE) answers pass untouched."""
    held: Message | None = None

    async def wrapped(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and message["status"] == 200 and _is_json(message):
            held = message
            return
        if held is not None and message["type"] == "http.response.body":
            start, held = held, None
            if not message.get("more_body", False):
                challenge = _challenge_for(message.get("body", b""), identity)
                if challenge is not None:
                    start = {**start, "status": 403, "headers": [*start.get("headers", []), *challenge]}
            await send(start)
        await send(message)

    return wrapped


def _is_json(message: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"application/json")
        for name, value in message.get("headers", [])
    )


def _challenge_for(body: bytes, identity: Identity) -> list[tuple[bytes, bytes]] | None:
    # Every answer passes here: a result (no "error" member, as our encoder writes keys plainly) is
    # not parsed a second time, however large.
    if b'"error"' not in body:
        return None
    try:
        reply: Any = json.loads(body)
        error = (
            ErrorData.model_validate(reply["error"]) if isinstance(reply, dict) and "error" in reply else None
        )
    except (ValueError, ValidationError):
        return None
    return None if error is None else step_up_challenge(identity=identity, error=error)
