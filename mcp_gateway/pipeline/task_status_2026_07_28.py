"""Task status notifications of the tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) on
``subscriptions/listen`` streams (2026-07-28).

A client names the tasks it wants to follow in its listen filter, ``notifications.taskIds``; each
time one of them changes, the stream carries ``notifications/tasks`` whose params are the
task as ``tasks/get`` would answer it at that moment (the ``DetailedTask``: status, timestamps, and
the inlined result, error or input requests; not ``resultType``, which belongs to a result), tagged
with the subscription id like every frame of the stream. Nothing is sent at subscribe time: a task
that finished before the stream opened is seen by the client's next ``tasks/get`` (it polls anyway).

Tasks change in the jobs worker, another process: a trigger on the jobs table (jobs migration 0002)
sends ``NOTIFY`` on ``TASK_CHANNEL`` with the task's, tenant's and person's ids once the change
commits; ``list_changes`` hears it on its one ``LISTEN`` connection per worker and hands it to
``TaskWatchers``, which wakes only the streams of that person in that tenant that named that task.
Each stream then reads the task through the runner as its own caller, so another person's task,
an unknown id or a malformed one yields nothing, and the acknowledgement echoes every well-formed
id whoever owns it (acknowledging only one's own would tell who owns which task).

The SDK's ``ListenHandler`` knows only its own event kinds, so a stream naming tasks is served here
(``task_listen``), mirroring it: acknowledgement first, the same tenant bus for list changes, the
same bounded backlog. Streams that name no task stay the SDK's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY, ServerEvent, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import event_matches, event_to_notification
from mcp_types import (
    INVALID_REQUEST,
    ServerNotification,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenResult,
)
from mcp_types.jsonrpc import INVALID_PARAMS

from core.errors import NotFound
from core.identity import Identity
from mcp_gateway.kernel.task_wire_2026_07_28 import detailed_task, task_id_screened
from mcp_gateway.kernel.tool_tasks_2026_07_28 import ToolTaskRunner

logger = logging.getLogger(__name__)

TASK_CHANNEL = "gatehouse_mcp_task_status"
# The extension's bare name (the conformance suite's scenario and the other 2026-07-28 servers):
# ``notifications/tasks/status`` is the 2025-11-25 notification, pushed on the call's own stream.
TASK_STATUS_METHOD = "notifications/tasks"
TASK_IDS_KEY = "taskIds"
# Tasks one stream may follow; a client with more opens more streams (or polls).
MAX_TASK_IDS = 100
NOT_A_LIST = "notifications.taskIds must be an array of task ids."
TOO_MANY = f"notifications.taskIds names more than {MAX_TASK_IDS} tasks; open another stream for the rest."


@dataclass(frozen=True, slots=True)
class TaskStatusChanged:
    """One of a stream's tasks may have changed: the stream reads it and tells the client."""

    task_id: str


StreamItem = ServerEvent | TaskStatusChanged


def task_ids_requested(notifications: SubscriptionFilter) -> list[str] | None:
    """The task ids a listen filter names (None: the key is absent), screened: -32602 for a value
    that is not a list or names too many; entries that cannot be task ids (not strings, NUL bytes,
    too long) are dropped, duplicates too."""
    extra = notifications.model_extra or {}
    raw = extra.get(TASK_IDS_KEY)
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise MCPError(code=INVALID_PARAMS, message=NOT_A_LIST)
    if len(raw) > MAX_TASK_IDS:
        raise MCPError(code=INVALID_PARAMS, message=TOO_MANY)
    ids: list[str] = []
    for value in raw:
        screened = task_id_screened(value)
        if screened is not None and screened not in ids:
            ids.append(screened)
    return ids


@dataclass(frozen=True, slots=True)
class _Watch:
    identity: Identity
    deliver: Callable[[TaskStatusChanged], None]


class TaskWatchers:
    """This worker's streams that follow tasks, by task id."""

    def __init__(self) -> None:
        self._by_task: dict[str, dict[object, _Watch]] = {}

    def watch(
        self, *, identity: Identity, task_ids: list[str], deliver: Callable[[TaskStatusChanged], None]
    ) -> Callable[[], None]:
        """Have ``deliver`` called when one of ``task_ids`` of ``identity`` changes; returns the
        (idempotent) unwatch."""
        token = object()
        for task_id in task_ids:
            self._by_task.setdefault(task_id, {})[token] = _Watch(identity=identity, deliver=deliver)

        def unwatch() -> None:
            for task_id in task_ids:
                watches = self._by_task.get(task_id)
                if watches is not None:
                    watches.pop(token, None)
                    if not watches:
                        del self._by_task[task_id]

        return unwatch

    def changed(self, *, task_id: str, tenant_id: int, user_id: int) -> None:
        """The task ``task_id`` of ``user_id`` in ``tenant_id`` changed (a ``NOTIFY``)."""
        for watch in list(self._by_task.get(task_id, {}).values()):
            if watch.identity.tenant_id == tenant_id and watch.identity.user_id == user_id:
                watch.deliver(TaskStatusChanged(task_id))

    def everything_changed(self) -> None:
        """Changes may have been missed (the ``LISTEN`` connection was lost): every stream rereads
        its tasks (it sends only those that differ from what it sent last)."""
        for task_id, watches in list(self._by_task.items()):
            for watch in list(watches.values()):
                watch.deliver(TaskStatusChanged(task_id))

    def __len__(self) -> int:
        return len(self._by_task)


class _RawNotification:
    """A notification the SDK has no type for, sent through ``send_notification`` as it is: the
    SDK dumps typed ones with ``exclude_none``, which would drop ``ttlMs: null`` (a required field
    of the task, meaning kept until deleted)."""

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}


def task_status_params(wire: dict[str, Any], *, meta: dict[str, Any]) -> dict[str, Any]:
    """``notifications/tasks`` params: ``tasks/get``'s ``DetailedTask`` and the stream's tag."""
    params = {key: value for key, value in wire.items() if key != "resultType"}
    params["_meta"] = dict(meta)
    return params


async def task_listen(
    ctx: ServerRequestContext[Any, Any],
    *,
    identity: Identity,
    honored: SubscriptionFilter,
    task_ids: list[str],
    bus: SubscriptionBus,
    watchers: TaskWatchers,
    runner: ToolTaskRunner,
    max_buffered_events: int,
) -> SubscriptionsListenResult:
    """Serve one listen stream that follows ``task_ids`` (and what else ``honored`` asks for)."""
    subscription_id = ctx.request_id
    if subscription_id is None:
        raise MCPError(INVALID_REQUEST, "subscriptions/listen requires a request id")
    acknowledged = SubscriptionFilter(
        tools_list_changed=True if honored.tools_list_changed else None,
        prompts_list_changed=True if honored.prompts_list_changed else None,
        resources_list_changed=True if honored.resources_list_changed else None,
        resource_subscriptions=(
            list(honored.resource_subscriptions) if honored.resource_subscriptions else None
        ),
        **{TASK_IDS_KEY: list(task_ids)},
    )
    uris = frozenset(acknowledged.resource_subscriptions or ())
    meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
    send, recv = anyio.create_memory_object_stream[StreamItem](max_buffered_events)

    def deliver(item: StreamItem) -> None:
        if not isinstance(item, TaskStatusChanged) and not event_matches(acknowledged, uris, item):
            return
        try:
            send.send_nowait(item)
        except anyio.ClosedResourceError:
            pass
        except anyio.WouldBlock:
            # As the SDK's streams: a client that stopped reading is ended; it re-listens.
            logger.warning("listen stream %r backlog full; ending the stream", subscription_id)
            send.close()

    # Subscribed before the ack, so a change committed while the ack is written is not lost.
    unsubscribe = bus.subscribe(deliver)
    unwatch = watchers.watch(identity=identity, task_ids=task_ids, deliver=deliver)
    sent: dict[str, dict[str, Any]] = {}
    try:
        await ctx.session.send_notification(
            SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(notifications=acknowledged, _meta=meta)
            ),
            related_request_id=subscription_id,
        )
        async for item in recv:
            if not isinstance(item, TaskStatusChanged):
                await ctx.session.send_notification(
                    event_to_notification(item, meta), related_request_id=subscription_id
                )
                continue
            try:
                wire = detailed_task(await runner.get(identity=identity, task_id=item.task_id))
            except NotFound:
                continue  # not the caller's task (or gone): nothing, as for an unknown id
            if sent.get(item.task_id) == wire:
                continue  # several changes read at once, or a reread after a lost connection
            sent[item.task_id] = wire
            notification = _RawNotification(TASK_STATUS_METHOD, task_status_params(wire, meta=meta))
            await ctx.session.send_notification(
                cast(ServerNotification, notification), related_request_id=subscription_id
            )
    finally:
        unwatch()
        try:
            unsubscribe()
        except Exception:
            logger.exception("bus unsubscribe raised; continuing stream cleanup")
        send.close()
        recv.close()
    return SubscriptionsListenResult(_meta=meta)
