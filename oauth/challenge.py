"""What a protected resource answers a request without a usable token: the RFC 6750 challenge,
naming the resource's RFC 9728 metadata and the scopes it knows. The MCP endpoint and the REST API
answer alike."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from accounts.scopes import scope_definitions


def protected_resource_metadata_url(resource_path: str | None = None) -> str:
    """RFC 9728 metadata of the resource at ``resource_path`` (the MCP endpoint unless given)."""
    return f"{settings.PUBLIC_URL}/.well-known/oauth-protected-resource{resource_path or settings.MCP_PATH}"


def www_authenticate(
    *,
    error: str | None,
    description: str | None,
    scopes: Iterable[str] | None = None,
    resource_path: str | None = None,
) -> str:
    """The RFC 6750 challenge of the resource at ``resource_path`` (the MCP endpoint unless given;
    the REST API passes its own), naming its metadata and ``scopes`` (by default every scope)."""
    parts = []
    if error:
        parts.append(f'error="{error}"')
    if description:
        parts.append(f'error_description="{description}"')
    parts.append(f'resource_metadata="{protected_resource_metadata_url(resource_path)}"')
    parts.append(f'scope="{" ".join(sorted(scope_definitions() if scopes is None else scopes))}"')
    return "Bearer " + ", ".join(parts)
