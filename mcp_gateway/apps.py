from __future__ import annotations

from django.apps import AppConfig


class McpGatewayConfig(AppConfig):
    name = "mcp_gateway"
    verbose_name = "MCP gateway"

    def ready(self) -> None:
        from mcp_gateway.metrics import metrics_install

        metrics_install()
