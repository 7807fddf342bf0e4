from __future__ import annotations

from django.apps import AppConfig


class ConformanceFixturesConfig(AppConfig):
    name = "conformance_fixtures"
    verbose_name = "Conformance fixtures"
