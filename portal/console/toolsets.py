"""What the console's tools section reads (the deployment's toolsets, on or off for a tenant, and
the tenant's upstream servers) and the one change it makes: a toolset switched on or off, through
``toolset_set_enabled`` as the admin and ``manage.py toolsets`` do, which audits it with who and what."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from accounts.models import Tenant
from core.errors import InvalidInput
from mcp_gateway.kernel.registry import Registry, ToolSpec
from mcp_gateway.kernel.toolset_access import toolset_set_enabled, toolsets_cache_forget, toolsets_enabled
from portal.console.access import ConsoleTenant
from upstreams.models import Upstream

UNKNOWN_TOOLSET = "This deployment serves no toolset {name!r}."
# What of a refused name the message repeats: enough to recognise it, never a page of it.
NAME_SHOWN = 60


@dataclass(frozen=True)
class ConsoleTool:
    name: str
    title: str
    description: str
    # Sorted, for a stable page.
    scopes: tuple[str, ...]
    read_only: bool


@dataclass(frozen=True)
class ConsoleToolset:
    """A toolset as the console shows it: on or off for the tenant, with its own tools."""

    name: str
    description: str
    enabled: bool
    tools: tuple[ConsoleTool, ...]
    # Its entries come from elsewhere (the tenant's upstream servers), not only from ``tools``.
    federated: bool


def console_toolset_list(*, tenant: Tenant, registry: Registry) -> list[ConsoleToolset]:
    """Every toolset of ``registry``, in its order, each said on or off for ``tenant`` as of now."""
    enabled = _enabled_now(tenant=tenant, registry=registry)
    return [
        ConsoleToolset(
            name=toolset.name,
            description=toolset.description,
            enabled=toolset.name in enabled,
            tools=tuple(_tool(spec) for spec in sorted(toolset.tools, key=lambda spec: spec.name)),
            federated=toolset.federation is not None,
        )
        for toolset in registry.toolsets
    ]


def console_upstream_list(*, tenant: Tenant) -> QuerySet[Upstream]:
    return Upstream.objects.filter(tenant=tenant).only(
        "name", "transport", "enabled", "last_tested", "tool_names", "tenant_id"
    )


def console_toolset_switch(
    *, console: ConsoleTenant, toolset: str, enabled: bool, registry: Registry
) -> bool:
    """Switch ``toolset`` on or off for the console's tenant; whether that changed anything (the
    same state again writes nothing and records nothing)."""
    console.require_admin()
    if registry.toolset(toolset) is None:
        raise InvalidInput(UNKNOWN_TOOLSET.format(name=toolset[:NAME_SHOWN]))
    return toolset_set_enabled(
        tenant=console.tenant, toolset=toolset, enabled=enabled, registry=registry, by=console.person
    )


def _tool(spec: ToolSpec) -> ConsoleTool:
    return ConsoleTool(
        name=spec.name,
        title=spec.title or "",
        description=spec.description,
        scopes=tuple(sorted(spec.scopes)),
        read_only=spec.read_only,
    )


def _enabled_now(*, tenant: Tenant, registry: Registry) -> frozenset[str]:
    # Not this process's cached answer: another worker (or the admin) may have changed it since.
    toolsets_cache_forget(tenant_id=tenant.pk)
    return toolsets_enabled(tenant_id=tenant.pk, registry=registry)
