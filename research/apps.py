from __future__ import annotations

from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "research"
    verbose_name = "Research"

    def ready(self) -> None:
        from jobs.kinds import job_kind_register
        from mcp_gateway.kernel.tool_tasks_2026_07_28 import tool_task_runner_register
        from research.literature_job import literature_search
        from research.task_runner import literature_task_runner

        job_kind_register(literature_search)
        # On 2026-07-28 a task-augmented search_papers is the literature job (research.task_runner).
        tool_task_runner_register(runner=literature_task_runner, tools=literature_task_runner.tools)
