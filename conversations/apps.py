from __future__ import annotations

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
