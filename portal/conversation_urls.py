"""The conversation pages, at ``/conversations/`` (config/urls.py)."""

from __future__ import annotations

from django.urls import path

from portal import conversation_views

app_name = "conversations"

urlpatterns = [
    path("", conversation_views.conversation_list, name="list"),
    # Any text, not a <uuid:>: a malformed id is answered by the same "not found" page as an unknown one.
    path("<str:conversation_id>/", conversation_views.conversation_detail, name="detail"),
]
