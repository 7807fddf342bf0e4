"""Reading conversations: which binding a call stands on, a person's conversations, a digest of turns.

Every lookup is scoped to the caller's person and tenant: a conversation or binding of anyone
else reads as absent (``None`` or ``NotFound``), never as someone else's, so an id guessed or
copied from another account confirms nothing.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.db.models import QuerySet

from conversations.models import BINDING_KEY_MAX_CHARS, TOPIC_MAX_CHARS, Conversation, SessionBinding, Turn
from core.errors import NotFound

CONVERSATION_NOT_FOUND = "No such conversation of yours in this tenant."
INITIALIZE_FIRST = "Call initialize first: this session has no conversation yet."
LIST_LIMIT_MAX = 100
DIGEST_TURNS = 50


def binding_key(*, session_id: str | None, user_id: int, tenant_id: int, client_id: str) -> str:
    """Where a call stands: its MCP session when the handshake era gave one, else (2026-07-28,
    no session) the person's client in this tenant.

    A key too long for the column keeps its shape with the variable part hashed, under a prefix
    of its own, so a hashed key never equals a plain one.
    """
    if session_id:
        key = f"session:{session_id}"
        if len(key) <= BINDING_KEY_MAX_CHARS:
            return key
        return f"session-sha256:{_sha256(session_id)}"
    key = f"client:{user_id}:{tenant_id}:{client_id}"
    if len(key) <= BINDING_KEY_MAX_CHARS:
        return key
    return f"client-sha256:{user_id}:{tenant_id}:{_sha256(client_id)}"


def _sha256(value: str) -> str:
    # surrogatepass: a client id is text from outside and may hold a lone surrogate.
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def topic_key_of(topic: str) -> str:
    """The topic as uniqueness sees it: case and every space ignored.

    Case folding may lengthen a topic ("ß" becomes "ss"); a key past the column keeps its start
    and ends with a hash of the whole, so two different long topics never share a key.
    """
    key = "".join(topic.casefold().split())
    if len(key) <= TOPIC_MAX_CHARS:
        return key
    digest = _sha256(key)
    return key[: TOPIC_MAX_CHARS - len(digest) - 1] + "#" + digest


def binding_get(*, key: str, user_id: int, tenant_id: int) -> SessionBinding | None:
    """The binding at ``key`` if it is the caller's (same person and tenant), else None."""
    return (
        SessionBinding.objects.filter(key=key, user_id=user_id, tenant_id=tenant_id)
        .select_related("conversation")
        .first()
    )


def conversation_get(*, user_id: int, tenant_id: int, conversation_id: uuid.UUID) -> Conversation:
    """The caller's conversation, or ``NotFound``: another person's, another tenant's and an
    unknown id all answer alike."""
    conversation = Conversation.objects.filter(
        pk=conversation_id, user_id=user_id, tenant_id=tenant_id
    ).first()
    if conversation is None:
        raise NotFound(CONVERSATION_NOT_FOUND)
    return conversation


def conversations_list(*, user_id: int, tenant_id: int, limit: int) -> list[Conversation]:
    """The person's conversations in this tenant, newest ``updated`` first, at most ``limit``
    (clamped to 1..100)."""
    limit = max(1, min(LIST_LIMIT_MAX, limit))
    recent: QuerySet[Conversation] = Conversation.objects.filter(user_id=user_id, tenant_id=tenant_id)
    return list(recent.order_by("-updated", "-created")[:limit])


def conversation_turn_digest(*, conversation_id: uuid.UUID) -> list[dict[str, Any]]:
    """What a summary is written from: the newest 50 turns, oldest first (reading order), each as
    ``{kind, request, command_name, success}``; ``command_name`` is the one the turn's output
    names, or "" when it names none."""
    turns = Turn.objects.filter(conversation_id=conversation_id).order_by("-created", "-id")
    newest = list(turns.values("kind", "request", "output", "success")[:DIGEST_TURNS])
    newest.reverse()
    return [
        {
            "kind": turn["kind"],
            "request": turn["request"],
            "command_name": _command_name(turn["output"]),
            "success": turn["success"],
        }
        for turn in newest
    ]


def _command_name(output: Any) -> str:
    name = output.get("command_name") if isinstance(output, dict) else None
    return name if isinstance(name, str) else ""
