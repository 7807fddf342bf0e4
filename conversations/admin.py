"""Conversations, turns and session bindings in the admin, read-only.

They are people's own records, written only by the workflow tools: operators look (to answer a
support question, to see what a workflow was asked), never add, edit or delete. Every value shown
came from a person or a model, so it is escaped like everything the admin prints, and the JSON of
a turn is pretty-printed inside ``<pre>``.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from conversations.models import Conversation, SessionBinding, Turn

# Enough to tell turns apart in a list; the turn's own page shows the whole request.
LIST_TEXT_MAX_CHARS = 60

_TURN_INLINE_FIELDS = (
    "created",
    "kind",
    "request_short",
    "success",
    "duration_ms",
    "feedback_score",
    "feedback_text",
)

_CONVERSATION_FIELDS = (
    "id",
    "user",
    "tenant",
    "client_id",
    "topic",
    "summary",
    "summary_derived",
    "created",
    "updated",
)

_TURN_FIELDS = (
    "conversation",
    "kind",
    "request",
    "success",
    "duration_ms",
    "created",
    "output_json",
    "traces_json",
    "feedback_score",
    "feedback_text",
    "feedback_at",
)

_BINDING_FIELDS = (
    "key",
    "user",
    "tenant",
    "conversation",
    "context",
    "turn_until",
    "created",
    "updated",
)


def _pretty_json(value: Any) -> SafeString:
    return format_html(
        "<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    )


class _ReadOnly:
    """Viewing stays allowed (the view permission); adding, changing and deleting do not."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TurnInline(_ReadOnly, admin.TabularInline):
    model = Turn
    extra = 0
    # The JSON stays on each turn's own page (the link): a long conversation's page stays light.
    fields = _TURN_INLINE_FIELDS
    readonly_fields = fields
    show_change_link = True

    @admin.display(description="request")
    def request_short(self, turn: Turn) -> str:
        return Truncator(turn.request).chars(LIST_TEXT_MAX_CHARS)


@admin.register(Conversation)
class ConversationAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["topic_or_id", "user", "tenant", "updated", "turn_count"]
    list_filter = ["tenant"]
    list_select_related = ["user", "tenant"]
    search_fields = ["topic", "user__username"]
    fields = _CONVERSATION_FIELDS
    readonly_fields = fields
    inlines = [TurnInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).annotate(turn_total=Count("turns"))

    @admin.display(description="topic", ordering="topic")
    def topic_or_id(self, conversation: Conversation) -> str:
        return str(conversation)

    @admin.display(description="turns", ordering="turn_total")
    def turn_count(self, conversation: Conversation) -> int:
        return int(getattr(conversation, "turn_total", 0))


@admin.register(Turn)
class TurnAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = [
        "created",
        "kind",
        "request_short",
        "conversation",
        "success",
        "duration_ms",
        "feedback_score",
    ]
    list_filter = ["kind", "success", "conversation__tenant"]
    list_select_related = ["conversation"]
    search_fields = ["request", "conversation__topic", "conversation__user__username"]
    fields = _TURN_FIELDS
    readonly_fields = fields
    # Turns are many: counting them all on each page view is slow, a filtered count is enough.
    show_full_result_count = False

    @admin.display(description="request")
    def request_short(self, turn: Turn) -> str:
        return Truncator(turn.request).chars(LIST_TEXT_MAX_CHARS)

    @admin.display(description="output")
    def output_json(self, turn: Turn) -> SafeString:
        return _pretty_json(turn.output)

    @admin.display(description="traces")
    def traces_json(self, turn: Turn) -> SafeString:
        return _pretty_json(turn.traces)


@admin.register(SessionBinding)
class SessionBindingAdmin(_ReadOnly, admin.ModelAdmin):
    list_display = ["key", "user", "tenant", "conversation", "context", "turn_until", "updated"]
    list_filter = ["tenant"]
    list_select_related = ["user", "tenant", "conversation"]
    search_fields = ["key", "user__username"]
    fields = _BINDING_FIELDS
    readonly_fields = fields
