"""What each upstream publishes (tools, resources, resource templates, prompts), fetched through a
pooled session and kept per process for ``UPSTREAM_LIST_CACHE_SECONDS``; an upstream's
``list_changed`` notification drops its copy at once.

An upstream that cannot be reached keeps its last lists (so a call to one of its tools reaches it
and fails with the upstream's name, rather than as an unknown tool) and is asked again after a
short pause rather than on every request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.client.session import ClientSession
from mcp.shared.uri_template import UriTemplate
from mcp_types import PaginatedRequestParams

from core.conf import gatehouse_settings
from core.text_safety import text_cleaned
from mcp_gateway.kernel.federation import LIST_KEYS, FederatedItem, Federation, Kind
from upstreams.config import ConfigKey, UpstreamConfig
from upstreams.models import Transport
from upstreams.openapi.tools import openapi_listed, openapi_write_scopes
from upstreams.pool import UpstreamPool, error_describe

logger = logging.getLogger(__name__)

# A list is read page by page up to these bounds; an upstream publishing more is cut, loudly.
MAX_PAGES = 50
MAX_ENTRIES = 2000
RETRY_AFTER_FAILURE_SECONDS = 5.0
# Lists are small and quick; a tenant's tools/list waits no longer than this for an upstream's
# (after connecting), whatever its call timeout.
LIST_SECONDS = 10.0
# Where each kind's entry says what the upstream calls it.
_ORIGINAL_KEY: dict[Kind, str] = {
    "tool": "name",
    "prompt": "name",
    "resource": "uri",
    "resource_template": "uriTemplate",
}


@dataclass
class Published:
    """One upstream's entries, as Gatehouse's clients see them, by kind and name."""

    items: dict[Kind, dict[str, FederatedItem]] = field(default_factory=dict)
    templates: list[tuple[UriTemplate, FederatedItem]] = field(default_factory=list)
    expires: float = 0.0
    error: str | None = None


class Catalog:
    def __init__(self, *, pool: UpstreamPool, federation: Federation) -> None:
        self._pool = pool
        self._federation = federation
        self._published: dict[ConfigKey, Published] = {}
        self._fetching: dict[ConfigKey, asyncio.Task[Published]] = {}

    def forget(self, key: ConfigKey) -> None:
        published = self._published.get(key)
        if published is not None:
            published.expires = 0.0

    async def published(self, config: UpstreamConfig) -> Published:
        current = self._published.get(config.key)
        if current is not None and current.expires > time.monotonic():
            return current
        # One fetch per upstream at a time, whoever asks.
        task = self._fetching.get(config.key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._refresh(config, current))
            self._fetching[config.key] = task
            task.add_done_callback(lambda _: self._fetching.pop(config.key, None))
        return await asyncio.shield(task)

    async def _refresh(self, config: UpstreamConfig, previous: Published | None) -> Published:
        if config.transport == Transport.OPENAPI:
            # Generated when it was saved: nothing to fetch.
            published = self._publish(config, {"tool": openapi_listed(config.openapi_tools)})
            published.expires = time.monotonic() + gatehouse_settings.UPSTREAM_LIST_CACHE_SECONDS
            self._published[config.key] = published
            return published
        try:
            async with asyncio.timeout(config.connect_timeout + min(config.call_timeout, LIST_SECONDS)):
                async with self._pool.lease(config, identity={}, holder=None) as pooled:
                    assert pooled.session is not None
                    raw = await upstream_lists(pooled.session)
        except Exception as error:
            reason = error_describe(error)
            logger.warning("Upstream %s: its lists could not be fetched: %s", config.label, reason)
            kept = previous or Published()
            kept.error = reason
            kept.expires = time.monotonic() + RETRY_AFTER_FAILURE_SECONDS
            self._published[config.key] = kept
            return kept
        published = self._publish(config, raw)
        published.expires = time.monotonic() + gatehouse_settings.UPSTREAM_LIST_CACHE_SECONDS
        self._published[config.key] = published
        return published

    def _publish(self, config: UpstreamConfig, raw: dict[Kind, list[dict[str, Any]]]) -> Published:
        published = Published(items={kind: {} for kind in LIST_KEYS})
        # An OpenAPI operation that changes data (not GET, HEAD, OPTIONS) needs mcp:write too, as
        # Gatehouse's own tools that change data do.
        writes = openapi_write_scopes(config.openapi_tools)
        for kind, entries in raw.items():
            for entry in entries:
                original = str(entry.get(_ORIGINAL_KEY[kind], ""))
                if not original or (kind == "tool" and not config.selects(original)):
                    continue
                name = config.published(original) if kind in ("tool", "prompt") else original
                item = FederatedItem(
                    kind=kind,
                    name=name,
                    payload=_shown_entry(entry, name=name if kind in ("tool", "prompt") else None),
                    scopes=config.scopes | writes.get(original, frozenset()),
                    source=config.name,
                    federation=self._federation,
                    origin=(config, original),
                )
                if name in published.items[kind]:
                    continue
                published.items[kind][name] = item
                if kind == "resource_template":
                    try:
                        published.templates.append((UriTemplate.parse(name), item))
                    except Exception:
                        logger.warning("Upstream %s: unusable resource template %r", config.label, name[:200])
        return published


def _shown_entry(entry: dict[str, Any], *, name: str | None) -> dict[str, Any]:
    """The entry as clients receive it: under its published name, and its title and description
    without the invisible characters that reorder or hide text (``text_cleaned``)."""
    shown = {**entry, "name": name} if name is not None else dict(entry)
    for key in ("title", "description"):
        if isinstance(shown.get(key), str):
            shown[key] = text_cleaned(shown[key])
    return shown


async def upstream_lists(session: ClientSession) -> dict[Kind, list[dict[str, Any]]]:
    """Every list the upstream's capabilities announce, all pages (bounded), as JSON entries: what
    the catalog serves from, and what the configuration test counts."""
    capabilities = session.server_capabilities
    raw: dict[Kind, list[dict[str, Any]]] = {}
    if capabilities is None or capabilities.tools is not None:
        raw["tool"] = await _pages(session.list_tools, "tools")
    if capabilities is not None and capabilities.resources is not None:
        raw["resource"] = await _pages(session.list_resources, "resources")
        raw["resource_template"] = await _pages(session.list_resource_templates, "resource_templates")
    if capabilities is not None and capabilities.prompts is not None:
        raw["prompt"] = await _pages(session.list_prompts, "prompts")
    return raw


async def _pages(list_page: Callable[..., Awaitable[Any]], attribute: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await list_page(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        entries.extend(
            e.model_dump(by_alias=True, mode="json", exclude_none=True) for e in getattr(page, attribute)
        )
        cursor = page.next_cursor
        if not cursor or len(entries) >= MAX_ENTRIES:
            break
    if cursor:
        logger.warning(
            "An upstream publishes more than %d %s; the rest are not served", len(entries), attribute
        )
    return entries[:MAX_ENTRIES]
