from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class McpGatewayConfig(AppConfig):
    name = "mcp_gateway"
    verbose_name = "MCP gateway"

    def ready(self) -> None:
        if settings.GATEHOUSE["COUNT_QUERIES"]:
            from mcp_gateway.querycount import querycount_install

            querycount_install()
