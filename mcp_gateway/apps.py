from __future__ import annotations

from django.apps import AppConfig


class McpGatewayConfig(AppConfig):
    name = "mcp_gateway"
    verbose_name = "MCP gateway"
