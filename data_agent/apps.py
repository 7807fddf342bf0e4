from __future__ import annotations

from django.apps import AppConfig


class DataAgentConfig(AppConfig):
    name = "data_agent"
    verbose_name = "Data agent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The toolset's scopes must exist before anything (DOT's metadata, the consent page, the
        # scope table) lists them, whether or not a request has loaded the toolset yet.
        import data_agent.scopes  # noqa: F401
        from data_agent.resource_changes import resource_changes_connect

        resource_changes_connect()
