"""Which entries of a tenant's federations (``upstreams``) its lists show and its requests reach.

One selection serves both, so a client can call exactly what it was shown: a name of Gatehouse's
own is never taken by a federated entry; among federated entries the first listed keeps a name;
a tool or prompt name outside the specification's character set, or confusable with one listed
before it (``kernel.federated_names``), is left out. Each entry left out is logged once per
process, with the reason (operators see the same reasons in ``manage.py upstreams check``).
"""

from __future__ import annotations

import logging

from core.identity import Identity
from mcp_gateway.kernel.federated_names import DUPLICATE, SHADOWED, NameLedger, name_ledger
from mcp_gateway.kernel.federation import FederatedItem, Kind
from mcp_gateway.kernel.registry import Registry

logger = logging.getLogger(__name__)


class FederatedEntries:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._logged: set[tuple[str, str]] = set()

    async def listed(self, *, kind: Kind, identity: Identity, enabled: frozenset[str]) -> list[FederatedItem]:
        """The entries of ``kind`` the tenant's lists show, in order, whatever the caller's scopes."""
        shown, _ = await self._selected(kind=kind, identity=identity, enabled=enabled)
        return shown

    async def resolve(
        self, *, kind: Kind, name: str, identity: Identity, enabled: frozenset[str]
    ) -> FederatedItem | None:
        """The entry a request naming ``name`` reaches: for a tool or prompt, one the list shows;
        for a resource, also a URI one of the federations' templates matches."""
        ledger: NameLedger | None = None
        if kind == "tool" or kind == "prompt":
            shown, ledger = await self._selected(kind=kind, identity=identity, enabled=enabled)
            listed = next((item for item in shown if item.name == name), None)
            if listed is not None:
                return listed
        for federation in self.registry.federations(enabled=enabled):
            item = await federation.resolve(identity=identity, kind=kind, name=name)
            if item is None:
                continue
            # Not listed, yet the federation knows it: a tool of an upstream that cannot be
            # reached now (its last test's names), which a call still reaches, to fail with the
            # upstream's name. Held to the same names as the lists.
            why = ledger.left_out(item.name) if ledger is not None else None
            if why is not None:
                self._log_once(item, why)
                return None
            return item
        return None

    async def _selected(
        self, *, kind: Kind, identity: Identity, enabled: frozenset[str]
    ) -> tuple[list[FederatedItem], NameLedger | None]:
        """What the lists show, and (for tools and prompts) the ledger of the names they took."""
        ledger = (
            name_ledger(registry=self.registry, kind=kind) if kind == "tool" or kind == "prompt" else None
        )
        taken: set[str] = set()
        shown: list[FederatedItem] = []
        for federation in self.registry.federations(enabled=enabled):
            for item in await federation.items(identity=identity, kind=kind):
                why = (
                    ledger.left_out(item.name) if ledger is not None else self._unnamed_left_out(item, taken)
                )
                if why is not None:
                    self._log_once(item, why)
                    continue
                if ledger is not None:
                    ledger.take(item.name)
                taken.add(item.name)
                shown.append(item)
        return shown, ledger

    def _unnamed_left_out(self, item: FederatedItem, taken: set[str]) -> str | None:
        """Resources and templates: their URIs, which only Gatehouse's own or an earlier one take."""
        if self.registry.toolset_of_resource(item.name) is not None:
            return SHADOWED
        if item.name in taken:
            return DUPLICATE
        return None

    def _log_once(self, item: FederatedItem, why: str) -> None:
        if (item.source, item.name) not in self._logged:
            self._logged.add((item.source, item.name))
            logger.warning("%s %r of upstream %r is left out: %s", item.kind, item.name, item.source, why)
