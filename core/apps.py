from __future__ import annotations

from django.apps import AppConfig

from core.conf import gatehouse_settings


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Gatehouse core"

    def ready(self) -> None:
        from corsheaders.signals import check_request_enabled

        from core.cors import cors_request_enabled

        check_request_enabled.connect(cors_request_enabled, dispatch_uid="gatehouse-cors")
        if gatehouse_settings.GATEHOUSE_COUNT_QUERIES:
            from core.querycount import querycount_install

            querycount_install()
