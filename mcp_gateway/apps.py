from __future__ import annotations

from django.apps import AppConfig


class McpGatewayConfig(AppConfig):
    name = "mcp_gateway"
    verbose_name = "MCP gateway"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from accounts.models import Tenant
        from mcp_gateway.kernel.metrics import metrics_install
        from mcp_gateway.kernel.tenant_deactivation import tenant_saved

        metrics_install()
        post_save.connect(tenant_saved, sender=Tenant, dispatch_uid="mcp_gateway.tenant_saved")
