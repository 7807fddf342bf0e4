"""The protected resources Gatehouse issues tokens for (RFC 8707): the MCP endpoint and the REST
API. A token is bound to exactly one of them, so a token for one never opens the other."""

from __future__ import annotations

from django.conf import settings


def _names(uri: object, resource_url: str) -> bool:
    return isinstance(uri, str) and uri.rstrip("/") == resource_url


def is_mcp_resource(uri: object) -> bool:
    """Whether a resource indicator names this deployment's MCP endpoint (a trailing slash aside)."""
    return _names(uri, settings.MCP_RESOURCE_URL)


def is_api_resource(uri: object) -> bool:
    """Whether a resource indicator names this deployment's REST API (a trailing slash aside)."""
    return _names(uri, settings.API_RESOURCE_URL)


def served_resource(uri: object) -> str | None:
    """The canonical identifier of the resource ``uri`` names, or None if it names neither."""
    if is_mcp_resource(uri):
        return str(settings.MCP_RESOURCE_URL)
    if is_api_resource(uri):
        return str(settings.API_RESOURCE_URL)
    return None


def issued_for(resource: object, *, resource_url: str) -> bool:
    """Whether a stored token's resource list binds it to ``resource_url`` and nothing else."""
    return isinstance(resource, list) and bool(resource) and all(_names(r, resource_url) for r in resource)


# The scopes a token for the REST API is for, as its metadata advertises them. The scope itself is
# registered by llm_gateway (above this app); a test keeps the two names equal.
API_SCOPES: tuple[str, ...] = ("llm:invoke",)
