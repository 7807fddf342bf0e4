from __future__ import annotations

from django.apps import AppConfig


class UpstreamsConfig(AppConfig):
    name = "upstreams"
    verbose_name = "Upstream MCP servers"
    default_auto_field = "django.db.models.BigAutoField"
