"""A signed-in person's conversations with their tenants' workflows: the list (per tenant,
searchable by topic, a page at a time) and one conversation with every turn in full.

Read-only, and only ever the person's own: the selectors (``portal.conversation_selectors``) scope
each lookup, and anything else (another person's, a tenant they left, an id that names nothing)
is answered as not found by ``core.http_errors``.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from accounts.models import User
from core.text_safety import storable_text
from portal.conversation_display import turns_shown
from portal.conversation_selectors import (
    SEARCH_MAX_CHARS,
    conversation_for_person,
    conversation_tenant_for_person,
    conversation_tenants_for_person,
    conversation_turns,
    conversations_for_person,
)

PAGE_SIZE = 20


def _person(request: HttpRequest) -> User:
    # login_required has run, so this is a signed-in person, never AnonymousUser.
    assert isinstance(request.user, User)
    return request.user


@never_cache
@login_required
@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    person = _person(request)
    q = str(request.GET.get("q", "")).strip()
    slug = str(request.GET.get("tenant", ""))
    tenant = conversation_tenant_for_person(user_id=person.pk, slug=slug) if slug else None
    conversations = conversations_for_person(user_id=person.pk, tenant_id=tenant.pk if tenant else None, q=q)
    page = Paginator(conversations, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        # Shown back in the search box: cut to what a topic can hold, a NUL made visible.
        "q": storable_text(q[:SEARCH_MAX_CHARS])[0],
        "q_max": SEARCH_MAX_CHARS,
        "tenant": tenant,
        "tenants": conversation_tenants_for_person(user_id=person.pk),
    }
    return render(request, "conversations/list.html", context)


@never_cache
@login_required
@require_GET
def conversation_detail(request: HttpRequest, conversation_id: str) -> HttpResponse:
    conversation = conversation_for_person(user_id=_person(request).pk, conversation_id=conversation_id)
    turns = turns_shown(turns=conversation_turns(conversation=conversation))
    return render(request, "conversations/detail.html", {"conversation": conversation, "turns": turns})
