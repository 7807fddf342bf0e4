from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Gatehouse core"

    def ready(self) -> None:
        if settings.GATEHOUSE["GATEHOUSE_COUNT_QUERIES"]:
            from core.querycount import querycount_install

            querycount_install()
