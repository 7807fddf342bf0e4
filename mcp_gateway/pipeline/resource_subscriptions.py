"""``resources/subscribe`` and ``resources/unsubscribe`` for handshake-era sessions.

A subscription is a row of the session (``ResourceSubscription``), not a worker's memory: the
subscribe request may reach one worker and the session's standalone stream be held by another,
which looks the row up when the resource changes (``standalone_stream``). Whether the caller may
subscribe at all (the toolset on for the tenant, the scopes reading the resource needs) is the
request guard's, as for ``resources/read``. A URI nothing serves is accepted and never fires, as the
SDK's ``subscriptions/listen`` does for 2026-07-28.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp_types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from core.db import db_call
from core.errors import InvalidInput
from mcp_gateway.kernel.scope_keys import SESSION_KEY
from mcp_gateway.models import RESOURCE_URI_MAX_LENGTH, ResourceSubscription

# Past this, a session's further subscriptions are refused (unsubscribe first).
MAX_SUBSCRIPTIONS_PER_SESSION = 100

NO_SESSION = "resources/subscribe needs a session: updates arrive on the session's GET stream."
TOO_MANY = f"A session may subscribe to at most {MAX_SUBSCRIPTIONS_PER_SESSION} resources."
BAD_URI = "The resource URI must be 1 to {max} characters, without NUL or control characters."


def resource_uri_check(*, uri: str) -> None:
    if (
        not uri
        or len(uri) > RESOURCE_URI_MAX_LENGTH
        or any(ord(c) < 0x20 or 0xD800 <= ord(c) < 0xE000 for c in uri)
    ):
        raise InvalidInput(BAD_URI.format(max=RESOURCE_URI_MAX_LENGTH), data={"field": "uri"})


def resource_subscribe(*, session_id: str, uri: str) -> None:
    resource_uri_check(uri=uri)
    subscriptions = ResourceSubscription.objects.filter(session_id=session_id)
    if subscriptions.filter(uri=uri).exists():
        return
    if subscriptions.count() >= MAX_SUBSCRIPTIONS_PER_SESSION:
        raise InvalidInput(TOO_MANY, data={"limit": MAX_SUBSCRIPTIONS_PER_SESSION})
    # A concurrent subscribe of the same URI (another worker) is the same subscription.
    ResourceSubscription.objects.get_or_create(session_id=session_id, uri=uri)


def resource_unsubscribe(*, session_id: str, uri: str) -> None:
    ResourceSubscription.objects.filter(session_id=session_id, uri=uri).delete()


def resource_subscribers(*, session_ids: Iterable[str], uri: str) -> set[str]:
    """Of ``session_ids``, those subscribed to ``uri``."""
    return set(
        ResourceSubscription.objects.filter(session_id__in=list(session_ids), uri=uri).values_list(
            "session_id", flat=True
        )
    )


def resource_subscriptions_of(*, session_id: str) -> frozenset[str]:
    return frozenset(ResourceSubscription.objects.filter(session_id=session_id).values_list("uri", flat=True))


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str:
    session = getattr(ctx.request, "scope", {}).get(SESSION_KEY)
    if session is None:
        raise InvalidInput(NO_SESSION)
    return str(session.id)


async def subscribe(ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams) -> EmptyResult:
    await db_call(resource_subscribe, session_id=_session_id(ctx), uri=str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams) -> EmptyResult:
    await db_call(resource_unsubscribe, session_id=_session_id(ctx), uri=str(params.uri))
    return EmptyResult()
