"""Which toolsets a tenant has enabled, and the one way to switch one (``toolset_set_enabled``:
the console, the admin's tenant page and ``manage.py toolsets`` alike, each switch audited).

Read on every MCP request, so it is cached per process for a few seconds: an operator's change
takes effect within ``MCP_TOOLSET_CACHE_SECONDS`` everywhere, without a query on the hot path (at
once on a worker with open ``subscriptions/listen`` streams, which hears of it: ``list_changes``).
"""

from __future__ import annotations

import time

from django.db import transaction

from accounts.models import Tenant, User
from core.audit.trail import audit_record
from core.conf import gatehouse_settings
from core.db import db_call
from core.models import AuditAction
from mcp_gateway.kernel.registry import Registry
from mcp_gateway.models import TenantToolset

_cache: dict[int, tuple[float, frozenset[str]]] = {}


def toolsets_enabled_cached(*, tenant_id: int) -> frozenset[str] | None:
    """The cached answer, without touching the database (safe on the event loop)."""
    cached = _cache.get(tenant_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    return None


def toolsets_cache_forget(*, tenant_id: int) -> None:
    """Drop this process's cached answer for ``tenant_id`` (``list_changes`` heard it changed)."""
    _cache.pop(tenant_id, None)


async def toolsets_enabled_async(*, tenant_id: int, registry: Registry) -> frozenset[str]:
    """``toolsets_enabled`` from the event loop: the cached answer without a thread hop when there
    is one, else the query on Django's worker thread."""
    cached = toolsets_enabled_cached(tenant_id=tenant_id)
    if cached is not None:
        return cached
    return await db_call(toolsets_enabled, tenant_id=tenant_id, registry=registry)


def toolsets_enabled(*, tenant_id: int, registry: Registry) -> frozenset[str]:
    cached = toolsets_enabled_cached(tenant_id=tenant_id)
    if cached is not None:
        return cached
    now = time.monotonic()
    enabled = set(registry.default_enabled())
    for name, on in TenantToolset.objects.filter(tenant_id=tenant_id).values_list("toolset", "enabled"):
        if registry.toolset(name) is None:
            continue
        if on:
            enabled.add(name)
        else:
            enabled.discard(name)
    result = frozenset(enabled)
    _cache[tenant_id] = (now + gatehouse_settings.MCP_TOOLSET_CACHE_SECONDS, result)
    return result


def toolset_set_enabled(
    *,
    tenant: Tenant,
    toolset: str,
    enabled: bool,
    registry: Registry,
    by: User | None = None,
    via: str = "",
) -> bool:
    """Switch ``toolset`` on or off for ``tenant``; whether that changed anything.

    A switch is audited as ``toolset.switched`` in the same transaction, with who (``by``) or, when
    nobody signed in did it, the tool that did (``via``: "manage.py toolsets"), and ``from``/``to``.
    The state the toolset already has writes nothing and records nothing. ``ValueError`` for a
    toolset this deployment does not serve.
    """
    if registry.toolset(toolset) is None:
        known = ", ".join(sorted(t.name for t in registry.toolsets))
        raise ValueError(f"Unknown toolset {toolset!r}. This deployment serves: {known}.")
    with transaction.atomic():
        # The tenant's row lock puts two switches one after the other, so "from" is true.
        list(Tenant.objects.select_for_update().filter(pk=tenant.pk).values_list("pk", flat=True))
        # Not this process's cached answer: another worker may have switched it since.
        _cache.pop(tenant.pk, None)
        before = toolset in toolsets_enabled(tenant_id=tenant.pk, registry=registry)
        _cache.pop(tenant.pk, None)
        if before == enabled:
            return False
        TenantToolset.objects.update_or_create(tenant=tenant, toolset=toolset, defaults={"enabled": enabled})
        audit_record(
            action=AuditAction.TOOLSET_SWITCHED,
            user=by,
            tenant=tenant,
            target=toolset,
            detail={
                "toolset": toolset,
                "from": _state(before),
                "to": _state(enabled),
                **({"via": via} if via else {}),
            },
        )
        # A read in this process between the write and the commit would cache the old answer.
        transaction.on_commit(lambda: toolsets_cache_forget(tenant_id=tenant.pk))
    return True


def _state(enabled: bool) -> str:
    return "on" if enabled else "off"
