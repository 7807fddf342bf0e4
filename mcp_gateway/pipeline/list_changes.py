"""Tell a tenant's open ``subscriptions/listen`` streams when its tools, prompts or resources change.

On 2026-07-28 a client hears of list changes only on a ``subscriptions/listen`` stream (the SDK's
``ListenHandler``: acknowledgement first, every frame tagged with the subscription id, the client's
filter honoured). What changes a tenant's lists in Gatehouse is an operator turning a toolset on or
off for it (``manage.py toolsets``, the admin's inline, ``toolset_access.toolset_set_enabled``),
usually in another process than the one holding the stream. So the change travels through
PostgreSQL: a trigger on the ``TenantToolset`` table (migration 0012) sends ``NOTIFY`` on
``CHANNEL`` with the tenant and the toolset, whoever wrote the row and however, once the write
commits. Each worker with open streams ``LISTEN``s on one connection, and hands each change to its
streams of that tenant only: every tenant has its own bus and ``ListenHandler`` here, so nothing
can reach another tenant's stream, and one tenant's streams cannot use up another's slots.

Which lists changed follows from what the toolset owns (tools, prompts, resources; a toolset that
federates other servers may change any of them). A worker that lost its ``LISTEN`` connection may
have missed changes: when it is back, its streams are told every list changed (a spurious
notification costs a client one refetch; a missed one leaves it stale). The worker also forgets its
cached view of the tenant's toolsets (``toolset_access``), so the change applies there at once.

On SQLite (one process, no ``LISTEN``) a model signal carries the change to the streams instead.

The same connection carries the tasks extension's status changes (``task_status``): a stream whose
filter names ``taskIds`` is served there, with this tenant's bus for its list changes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db import connection
from django.db.models.signals import post_delete, post_save
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types import SubscriptionsListenRequestParams, SubscriptionsListenResult

from accounts.scopes import SCOPE_READ
from core.conf import gatehouse_settings
from core.db import db_call, psycopg_connect_kwargs
from core.identity import Identity
from mcp_gateway.kernel.changes import Change, change_get, change_record, local_listeners
from mcp_gateway.kernel.identity import identity_from_request
from mcp_gateway.kernel.identity_cache import CHANNEL as IDENTITY_CHANNEL
from mcp_gateway.kernel.identity_cache import KINDS as IDENTITY_KINDS
from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
from mcp_gateway.kernel.registry import Registry
from mcp_gateway.kernel.task_wire_2026_07_28 import (
    EXTENSION_NOT_DECLARED,
    MISSING_EXTENSION_CODE,
    missing_extension_error_data,
    request_declares_tasks,
)
from mcp_gateway.kernel.tool_tasks_2026_07_28 import tool_task_runner
from mcp_gateway.kernel.toolset_access import toolsets_cache_forget
from mcp_gateway.models import ChangeKind, TenantToolset
from mcp_gateway.pipeline.stream_bounds import (
    STREAMS_PER_PERSON,
    STREAMS_PER_TENANT,
    PersonStreams,
    stream_refused,
)
from mcp_gateway.pipeline.task_status_2026_07_28 import (
    TASK_CHANNEL,
    TASK_IDS_KEY,
    TaskWatchers,
    task_ids_requested,
    task_listen,
)
from mcp_gateway.pipeline.tasks_2026_07_28 import tasks_offered

logger = logging.getLogger(__name__)

CHANNEL = "gatehouse_mcp_list_changed"
# Open streams per tenant on one worker; a further listen request is refused before its ack.
MAX_STREAMS_PER_TENANT = 100
# Changes a stream may have queued unread before it is ended (the client re-listens and refetches).
MAX_BUFFERED_EVENTS = 64
LISTEN_RETRY_SECONDS = 2.0
LISTEN_WAIT_SECONDS = 10.0
UNAVAILABLE = "Change notifications are unavailable right now; retry shortly."
LISTEN_TARGET = "subscriptions/listen"

ALL_EVENTS: tuple[ServerEvent, ...] = (ToolsListChanged(), PromptsListChanged(), ResourcesListChanged())


class ChangeSink(Protocol):
    """Streams other than ``subscriptions/listen`` that hear changes (``standalone_stream``)."""

    async def changed(self, change: Change, events: tuple[ServerEvent, ...]) -> None: ...

    async def identity_changed(self, *, kind: str, key: int | str) -> None: ...

    async def everything_changed(self) -> None: ...


@dataclass
class _Tenant:
    """One tenant's streams on this worker."""

    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    handler: ListenHandler = field(init=False)
    streams: int = 0
    # Whose streams these are: a change of one person's role or account reaches their tenant's bus.
    users: Counter[int] = field(default_factory=Counter)
    # Of ``streams``, those following tasks (``task_status``), which the SDK's handler does not count.
    task_streams: int = 0

    def __post_init__(self) -> None:
        self.handler = ListenHandler(
            self.bus, max_subscriptions=MAX_STREAMS_PER_TENANT, max_buffered_events=MAX_BUFFERED_EVENTS
        )


class ListChanges:
    """This worker's listen streams, by tenant, and its ``LISTEN`` connection (started by the
    first stream)."""

    def __init__(self, *, registry: Registry, postgres: bool) -> None:
        self.registry = registry
        self.postgres = postgres
        self._tenants: dict[int, _Tenant] = {}
        self.task_watchers = TaskWatchers()
        # Open listen streams per person on this worker, across the tenants they belong to.
        self._per_person = PersonStreams()
        self._listening = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.sinks: list[ChangeSink] = []
        if not postgres:
            local_listeners.append(self._heard_locally)

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """Serve one ``subscriptions/listen`` stream, among its caller's tenant's."""
        identity = identity_from_request(ctx.request)
        self._loop = asyncio.get_running_loop()
        # Listening before the ack, so no change committed after the client was told it listens
        # can go unheard.
        await self._ready()
        task_ids = await self._task_ids(ctx, identity, params)
        runner = tool_task_runner()
        if runner is None:
            task_ids = None
        await self._bound(identity=identity, follows_tasks=task_ids is not None)
        tenant = self._tenants.setdefault(identity.tenant_id, _Tenant())
        tenant.streams += 1
        tenant.users[identity.user_id] += 1
        try:
            with self._per_person.holding(identity=identity):
                if task_ids is None or runner is None:
                    return await tenant.handler(ctx, params)
                tenant.task_streams += 1
                try:
                    return await task_listen(
                        ctx,
                        identity=identity,
                        honored=params.notifications,
                        task_ids=task_ids,
                        bus=tenant.bus,
                        watchers=self.task_watchers,
                        runner=runner,
                        max_buffered_events=MAX_BUFFERED_EVENTS,
                    )
                finally:
                    tenant.task_streams -= 1
        finally:
            tenant.streams -= 1
            tenant.users[identity.user_id] -= 1
            if tenant.users[identity.user_id] <= 0:
                del tenant.users[identity.user_id]
            if tenant.streams == 0 and self._tenants.get(identity.tenant_id) is tenant:
                del self._tenants[identity.tenant_id]

    async def _bound(self, *, identity: Identity, follows_tasks: bool) -> None:
        """Refuse a stream past the person's bound (``stream_bounds``) or the tenant's, before its
        acknowledgement."""
        reason, limit = STREAMS_PER_PERSON, gatehouse_settings.MCP_STREAMS_PER_PERSON
        if not self._per_person.full(identity=identity):
            tenant = self._tenants.get(identity.tenant_id)
            held = 0
            if tenant is not None:
                held = tenant.task_streams if follows_tasks else tenant.streams - tenant.task_streams
            if held < MAX_STREAMS_PER_TENANT:
                return
            reason, limit = STREAMS_PER_TENANT, MAX_STREAMS_PER_TENANT
        error = await stream_refused(identity=identity, target=LISTEN_TARGET, reason=reason, limit=limit)
        raise as_mcp_error(error)

    async def _task_ids(
        self,
        ctx: ServerRequestContext[Any, Any],
        identity: Identity,
        params: SubscriptionsListenRequestParams,
    ) -> list[str] | None:
        """The tasks this stream follows; None where the filter names none or the extension is not
        offered to the caller (then ``taskIds`` is a key this server does not know: left out of the
        acknowledgement, as the filter's unknown keys are). Offered but not declared by the request:
        -32021, as for ``tasks/get``."""
        if TASK_IDS_KEY not in (params.notifications.model_extra or {}):
            return None
        if not await tasks_offered(identity=identity, registry=self.registry):
            return None
        if SCOPE_READ not in identity.scopes:
            return None
        if not request_declares_tasks(dict(ctx.params or {})):
            raise MCPError(
                code=MISSING_EXTENSION_CODE,
                message=EXTENSION_NOT_DECLARED,
                data=missing_extension_error_data(),
            )
        return task_ids_requested(params.notifications)

    async def changed(self, *, tenant_id: int, toolsets: Iterable[str]) -> None:
        """``toolsets`` changed for ``tenant_id``: tell its streams on this worker what that
        changes."""
        toolsets_cache_forget(tenant_id=tenant_id)
        await self._publish(tenant_id, self.events(toolsets=toolsets), None)

    async def change_received(self, change: Change) -> None:
        """A logged change (``changes``), from whichever worker or trigger wrote it."""
        if change.kind in (ChangeKind.TOOLSET, ChangeKind.UPSTREAM):
            toolsets_cache_forget(tenant_id=change.tenant_id)
        await self._publish(change.tenant_id, self.change_events(change), change)

    def change_events(self, change: Change) -> tuple[ServerEvent, ...]:
        if change.kind == ChangeKind.TOOLSET:
            return self.events(toolsets=[change.toolset])
        if change.kind == ChangeKind.UPSTREAM:
            # An upstream server's tools, prompts and resources are served through a federating
            # toolset: any of the three may have changed.
            return ALL_EVENTS
        if change.kind == ChangeKind.RESOURCES_LIST:
            return (ResourcesListChanged(),)
        if change.kind == ChangeKind.RESOURCE and change.uri:
            return (ResourceUpdated(uri=change.uri),)
        return ()

    async def _publish(self, tenant_id: int, events: tuple[ServerEvent, ...], change: Change | None) -> None:
        tenant = self._tenants.get(tenant_id)
        if tenant is not None:
            for event in events:
                await tenant.bus.publish(event)
        if events:
            logged = change or Change(id=None, tenant_id=tenant_id, kind="")
            for sink in self.sinks:
                await sink.changed(logged, events)

    async def identity_received(self, payload: str) -> None:
        """A ``NOTIFY`` on ``identity_cache``'s channel: ``{"kind": "user", "id": 7}``. A person's
        role or membership changed: what they may list did too. And a stream lives only as long
        as what authenticated it (``standalone_stream`` ends those resting on the change)."""
        try:
            change = json.loads(payload)
            kind, key = change["kind"], change["id"]
            if kind not in IDENTITY_KINDS or not isinstance(key, int | str) or isinstance(key, bool):
                raise ValueError("wrong types")
        except (ValueError, KeyError, TypeError, RecursionError):
            logger.warning("Dropped a malformed identity notification: %r", payload[:200])
            return
        if kind == "user" and isinstance(key, int):
            for tenant in list(self._tenants.values()):
                if key in tenant.users:
                    for event in ALL_EVENTS:
                        await tenant.bus.publish(event)
        for sink in self.sinks:
            await sink.identity_changed(kind=kind, key=key)

    def events(self, *, toolsets: Iterable[str]) -> tuple[ServerEvent, ...]:
        """The list changes that turning ``toolsets`` on or off makes (none for unknown names)."""
        tools = prompts = resources = False
        for name in toolsets:
            toolset = self.registry.toolset(name)
            if toolset is None:
                continue
            federates = toolset.federation is not None
            tools = tools or bool(toolset.tools) or federates
            prompts = prompts or bool(toolset.prompts) or federates
            resources = resources or bool(toolset.resources) or federates
        found: list[ServerEvent] = []
        if tools:
            found.append(ToolsListChanged())
        if prompts:
            found.append(PromptsListChanged())
        if resources:
            found.append(ResourcesListChanged())
        return tuple(found)

    async def _everything_changed(self) -> None:
        for tenant_id, tenant in list(self._tenants.items()):
            toolsets_cache_forget(tenant_id=tenant_id)
            for event in ALL_EVENTS:
                await tenant.bus.publish(event)
        self.task_watchers.everything_changed()
        for sink in self.sinks:
            await sink.everything_changed()

    async def ready(self) -> None:
        """Listening (on PostgreSQL), so that nothing committed from now on goes unheard."""
        self._loop = asyncio.get_running_loop()
        await self._ready()

    async def _ready(self) -> None:
        if not self.postgres:
            return
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(self._listen_forever())
        try:
            async with asyncio.timeout(LISTEN_WAIT_SECONDS):
                await self._listening.wait()
        except TimeoutError:
            raise MCPError(code=-32005, message=UNAVAILABLE) from None

    async def _listen_forever(self) -> None:
        import psycopg

        lost = False
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(**psycopg_connect_kwargs()) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    await conn.execute(f"LISTEN {TASK_CHANNEL}")
                    await conn.execute(f"LISTEN {IDENTITY_CHANNEL}")
                    self._listening.set()
                    if lost:
                        await self._everything_changed()
                    async for notify in conn.notifies():
                        if notify.channel == TASK_CHANNEL:
                            self.task_received(notify.payload)
                        elif notify.channel == IDENTITY_CHANNEL:
                            await self.identity_received(notify.payload)
                        else:
                            await self.received(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("Change notifications lost their database connection; reconnecting")
            self._listening.clear()
            lost = True
            await asyncio.sleep(LISTEN_RETRY_SECONDS)

    async def received(self, payload: str) -> None:
        """A ``NOTIFY`` on ``CHANNEL``: a logged change (migration 0015), ``{"id": <id>, "tenant":
        <id>, "kind": <ChangeKind>, "toolset": <name>, "uri": <uri, or null when too long to
        carry>}``."""
        try:
            change = json.loads(payload)
            change_id, tenant_id, kind = change["id"], change["tenant"], change["kind"]
            toolset, uri = change.get("toolset") or "", change.get("uri")
            ints = (change_id, tenant_id)
            if (
                not all(isinstance(value, int) and not isinstance(value, bool) for value in ints)
                or kind not in ChangeKind.values
                or not isinstance(toolset, str)
                or not isinstance(uri, str | None)
            ):
                raise ValueError("wrong types")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            logger.warning("Dropped a malformed change notification: %r", payload[:200])
            return
        if uri is None and kind == ChangeKind.RESOURCE:
            logged = await db_call(change_get, change_id=change_id)
            if logged is None:
                return
            uri = logged.uri
        await self.change_received(
            Change(id=change_id, tenant_id=tenant_id, kind=kind, toolset=toolset, uri=uri or "")
        )

    def task_received(self, payload: str) -> None:
        """A ``NOTIFY`` on ``TASK_CHANNEL``: ``{"task": <id>, "tenant": <id>, "user": <id>}``."""
        try:
            change = json.loads(payload)
            task_id, tenant_id, user_id = change["task"], change["tenant"], change["user"]
            if not isinstance(task_id, str) or not all(
                isinstance(value, int) and not isinstance(value, bool) for value in (tenant_id, user_id)
            ):
                raise ValueError("wrong types")
        except (ValueError, KeyError, TypeError, RecursionError):
            logger.warning("Dropped a malformed task status notification: %r", payload[:200])
            return
        self.task_watchers.changed(task_id=task_id, tenant_id=tenant_id, user_id=user_id)

    def _heard_locally(self, change: Change) -> None:
        """SQLite: a change committed in this process, from any thread (``changes``)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(lambda: loop.create_task(self.change_received(change)))


def _row_changed(sender: Any, instance: TenantToolset, **kwargs: Any) -> None:
    """SQLite (no trigger): a toolset row saved or deleted is logged as the trigger would."""
    change_record(tenant_id=instance.tenant_id, kind=ChangeKind.TOOLSET, toolset=instance.toolset)


def list_changes_build(*, registry: Registry) -> ListChanges:
    postgres = connection.vendor == "postgresql"
    if not postgres:
        uid = "mcp_gateway.pipeline.list_changes"
        post_save.connect(_row_changed, sender=TenantToolset, dispatch_uid=f"{uid}.save")
        post_delete.connect(_row_changed, sender=TenantToolset, dispatch_uid=f"{uid}.delete")
    return ListChanges(registry=registry, postgres=postgres)
