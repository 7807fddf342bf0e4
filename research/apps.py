from __future__ import annotations

from django.apps import AppConfig


class ResearchConfig(AppConfig):
    name = "research"
    verbose_name = "Research"

    def ready(self) -> None:
        from jobs.kinds import job_kind_register
        from research.literature_job import literature_search

        job_kind_register(literature_search)
