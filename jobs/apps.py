from __future__ import annotations

from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # MCP tool tasks run as jobs: the endpoint finds the runner here, the workers the kind.
        from jobs.tool_task_kind import tool_task_kind_register
        from jobs.tool_tasks import JobToolTaskRunner
        from mcp_gateway.kernel.tool_tasks_2026_07_28 import tool_task_runner_register

        tool_task_kind_register()
        tool_task_runner_register(runner=JobToolTaskRunner())
