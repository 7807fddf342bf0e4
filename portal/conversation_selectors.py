"""A person's own conversations, read for the people's pages (``/conversations/``).

Every lookup is the person's own *and* in a tenant they are still an active member of: leaving a
tenant, or the tenant being deactivated, hides its conversations here as it hides the tenant
everywhere else, and another person's or tenant's conversation is simply not found (404), as an id
that names nothing is.

Search input arrives from the address bar, so it may hold what no topic can: a NUL or an unpaired
surrogate (which PostgreSQL would refuse, failing the query), or more characters than a topic has.
Such a search matches nothing, answered without asking the database.
"""

from __future__ import annotations

import uuid

from django.db.models import Count, QuerySet

from accounts.models import Membership, Tenant
from conversations.models import TOPIC_MAX_CHARS, Conversation, Turn
from core.errors import NotFound
from core.text_safety import text_is_storable

NO_CONVERSATION = "No such conversation."
NO_TENANT = "You are not a member of that tenant."
# A search longer than any topic cannot be found in one.
SEARCH_MAX_CHARS = TOPIC_MAX_CHARS
# The canonical text of a UUID is 36 characters; anything far longer is not worth parsing.
_UUID_MAX_CHARS = 45


def _active_tenant_ids(*, user_id: int) -> QuerySet[Membership, int]:
    memberships = Membership.objects.filter(user_id=user_id, tenant__is_active=True)
    return memberships.values_list("tenant_id", flat=True)


def conversation_tenants_for_person(*, user_id: int) -> list[Tenant]:
    """The tenants whose conversations the person may see: those they are an active member of."""
    return list(Tenant.objects.filter(memberships__user_id=user_id, is_active=True).order_by("name", "slug"))


def conversation_tenant_for_person(*, user_id: int, slug: str) -> Tenant:
    """One of the person's active tenants by slug, or ``NotFound``. Matched in Python against the
    person's own few tenants, so a hostile slug never reaches the database."""
    for tenant in conversation_tenants_for_person(user_id=user_id):
        if tenant.slug == slug:
            return tenant
    raise NotFound(NO_TENANT)


def conversation_search_is_answerable(*, q: str) -> bool:
    """Whether any topic could contain ``q``: not too long, and only characters a topic can hold."""
    return len(q) <= SEARCH_MAX_CHARS and text_is_storable(q)


def conversations_for_person(
    *, user_id: int, tenant_id: int | None = None, q: str = ""
) -> QuerySet[Conversation]:
    """The person's conversations in their active tenants (or in one of them), newest updated
    first, each with ``turn_count``; ``q`` keeps those whose topic contains it, ignoring case."""
    conversations = Conversation.objects.filter(
        user_id=user_id, tenant_id__in=_active_tenant_ids(user_id=user_id)
    )
    if tenant_id is not None:
        conversations = conversations.filter(tenant_id=tenant_id)
    q = q.strip()
    if q:
        if not conversation_search_is_answerable(q=q):
            return conversations.none()
        conversations = conversations.filter(topic__icontains=q)
    return (
        conversations.select_related("tenant")
        .annotate(turn_count=Count("turns"))
        .order_by("-updated", "-created", "pk")
    )


def conversation_for_person(*, user_id: int, conversation_id: str) -> Conversation:
    """One of the person's conversations, with its tenant and ``turn_count``, or ``NotFound``: the
    same for an id that is malformed, unknown, another person's, or in a tenant they left."""
    if len(conversation_id) > _UUID_MAX_CHARS or not text_is_storable(conversation_id):
        raise NotFound(NO_CONVERSATION)
    try:
        key = uuid.UUID(conversation_id)
    except ValueError:
        raise NotFound(NO_CONVERSATION) from None
    conversation = conversations_for_person(user_id=user_id).filter(pk=key).first()
    if conversation is None:
        raise NotFound(NO_CONVERSATION)
    return conversation


def conversation_turns(*, conversation: Conversation) -> list[Turn]:
    """The conversation's turns, in the order they were taken."""
    return list(Turn.objects.filter(conversation=conversation).order_by("created", "id"))
