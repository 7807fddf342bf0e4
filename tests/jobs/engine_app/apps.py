"""Registers the engine's test job kind in a worker process started with
``tests.jobs.worker_settings`` (the end-to-end tests' workers)."""

from __future__ import annotations

from django.apps import AppConfig


class EngineTestAppConfig(AppConfig):
    name = "tests.jobs.engine_app"
    label = "jobs_engine_test"

    def ready(self) -> None:
        from tests.jobs.engine_kind import engine_kind_register

        engine_kind_register()
