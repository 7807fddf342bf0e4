"""A tenant's enabled upstreams, as configuration snapshots, cached per process for as long as
its enabled toolsets are (``MCP_TOOLSET_CACHE_SECONDS``): read on every list and call. And the
tenant-scoped lookups the admin and the command line use."""

from __future__ import annotations

import logging
import time

from django.db.models import QuerySet

from accounts.models import Tenant
from core.conf import gatehouse_settings
from core.db import db_call
from core.errors import NotFound
from core.text_safety import text_is_storable
from upstreams.config import UpstreamConfig, config_from_row
from upstreams.models import Upstream

logger = logging.getLogger(__name__)

_cache: dict[int, tuple[float, tuple[UpstreamConfig, ...]]] = {}


def upstream_configs(*, tenant_id: int) -> tuple[UpstreamConfig, ...]:
    """The tenant's enabled upstreams, by name. One whose stored secret no longer decrypts is left
    out (and logged): it cannot connect until an operator enters the secret again."""
    configs = []
    for row in (
        Upstream.objects.filter(tenant_id=tenant_id, enabled=True).select_related("tenant").order_by("name")
    ):
        try:
            configs.append(config_from_row(row))
        except ValueError as error:
            logger.error("Upstream %s/%s left out: %s", row.tenant.slug, row.name, error)
    return tuple(configs)


async def upstream_configs_async(*, tenant_id: int) -> tuple[UpstreamConfig, ...]:
    cached = _cache.get(tenant_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    configs = await db_call(upstream_configs, tenant_id=tenant_id)
    _cache[tenant_id] = (time.monotonic() + gatehouse_settings.MCP_TOOLSET_CACHE_SECONDS, configs)
    return configs


def upstream_configs_forget(*, tenant_id: int) -> None:
    """Drop this process's copy after a change (other processes see it within the cache time)."""
    _cache.pop(tenant_id, None)


NO_UPSTREAM = "No upstream {name!r} in {tenant}."


def upstream_get(*, tenant: Tenant, name: str) -> Upstream:
    """The tenant's upstream named ``name``; another tenant's is not found, as a missing one."""
    # A NUL or lone surrogate cannot be stored, so no such row exists; asking PostgreSQL would fail.
    found = (
        Upstream.objects.filter(tenant=tenant, name=name).select_related("tenant").first()
        if text_is_storable(name)
        else None
    )
    if found is None:
        raise NotFound(NO_UPSTREAM.format(name=name, tenant=tenant.slug))
    return found


def upstream_list(*, tenant: Tenant | None = None) -> QuerySet[Upstream]:
    """Upstreams (of one tenant, if given), by tenant and name."""
    rows = Upstream.objects.select_related("tenant").order_by("tenant__slug", "name")
    return rows.filter(tenant=tenant) if tenant is not None else rows
