"""The one protected resource Gatehouse issues tokens for (RFC 8707)."""

from __future__ import annotations

from django.conf import settings


def is_mcp_resource(uri: object) -> bool:
    """Whether a resource indicator names this deployment's MCP endpoint (a trailing slash aside)."""
    return isinstance(uri, str) and uri.rstrip("/") == settings.MCP_RESOURCE_URL
