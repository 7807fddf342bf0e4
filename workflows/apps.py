from __future__ import annotations

from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
