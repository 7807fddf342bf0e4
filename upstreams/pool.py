"""A bounded pool of open upstream sessions per process, on the official SDK's ``ClientSession``.

A call leases a session for its whole duration, so what the upstream sends in the middle of it
(log messages, an elicitation or sampling request) belongs to exactly one caller, the lease's
``holder``. Each upstream configuration (and, when the upstream wants the caller's identity, each
caller) has at most ``UPSTREAM_POOL_SIZE`` sessions in a process; more callers wait for one.

Each session lives in a task of its own, because the SDK's transports and session are anyio task
groups that must be entered and left by one task; requests use it from any task. A session that
failed at the transport (a closed connection, a terminated HTTP session) is closed, and so are the
idle sessions of the same upstream, which an upstream restart has most likely ended too: the next
call connects afresh. Idle sessions are closed after ``UPSTREAM_IDLE_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from mcp.client.session import ClientRequestContext, ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    Implementation,
    LoggingMessageNotificationParams,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    ToolListChangedNotification,
)
from pydantic import ValidationError

from core.conf import gatehouse_settings
from core.errors import UpstreamUnavailable
from mcp_gateway.kernel.sdk import client_session_closed, client_session_negotiate
from upstreams.config import UpstreamConfig
from upstreams.list_changes import COOLING_DOWN, FLOODED, FloodBound
from upstreams.metrics import metrics_upstream_notification
from upstreams.models import UpstreamProtocol
from upstreams.result_type import ResultTypeDefaulted
from upstreams.transports import upstream_streams

logger = logging.getLogger(__name__)

CLIENT_INFO = Implementation(name="gatehouse", version="0.1.0")
NO_CALLER = "No caller is waiting on this upstream session."
SESSION_TERMINATED = "Session terminated"
CONNECT_GRACE_SECONDS = 1.0
# What an upstream answers (HTTP 404) for a session it no longer knows: the SDK client's own words
# when the body is not JSON-RPC, the SDK server's JSON-RPC error (passed on as is) when it is.
SESSION_GONE = frozenset({SESSION_TERMINATED, "Session not found"})


class Downstream(Protocol):
    """The call that holds a session: where the upstream's requests and log messages go."""

    def log(self, params: LoggingMessageNotificationParams) -> None: ...

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult | ErrorData: ...

    async def sample(self, params: CreateMessageRequestParams) -> CreateMessageResult | ErrorData: ...


def transport_failed(error: BaseException) -> bool:
    """Whether ``error`` says the connection itself failed (rather than the upstream answering an
    error): the session is then of no further use."""
    if isinstance(error, MCPError):
        return error.error.code == CONNECTION_CLOSED or session_was_gone(error)
    # A result that fails its own schema (RuntimeError, ValidationError) is a bad answer on a good
    # session; a cancelled or timed-out call leaves the session usable too.
    return not isinstance(error, asyncio.CancelledError | TimeoutError | RuntimeError | ValidationError)


def session_was_gone(error: BaseException) -> bool:
    """The upstream no longer knew the session (HTTP 404 after a restart): the request was not
    run, so it is safe to send again on a new session."""
    return (
        isinstance(error, MCPError)
        and error.error.code == INVALID_REQUEST
        and error.error.message in SESSION_GONE
    )


@dataclass(eq=False)
class PooledSession:
    pool_key: tuple[Any, ...]
    config: UpstreamConfig
    session: ClientSession | None = None
    holder: Downstream | None = None
    idle_since: float = field(default_factory=time.monotonic)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    reused: bool = False
    flood: FloodBound = field(default_factory=FloodBound)
    # Why Gatehouse ended this session itself, for the call that was using it.
    ended_because: str | None = None

    @property
    def alive(self) -> bool:
        return (
            self.session is not None
            and self.task is not None
            and not self.task.done()
            and not client_session_closed(session=self.session)
        )

    async def _on_log(self, params: LoggingMessageNotificationParams) -> None:
        if self.holder is not None:
            self.holder.log(params)

    async def _on_elicit(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        if self.holder is None:
            return ErrorData(code=INVALID_REQUEST, message=NO_CALLER)
        return elicitation_defaults_applied(params, await self.holder.elicit(params))

    async def _on_sample(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        if self.holder is None:
            return ErrorData(code=INVALID_REQUEST, message=NO_CALLER)
        return await self.holder.sample(params)


class UpstreamPool:
    def __init__(self, *, on_list_changed: Callable[[UpstreamConfig], None]) -> None:
        self._on_list_changed = on_list_changed
        self._idle: dict[tuple[Any, ...], list[PooledSession]] = {}
        self._open: dict[tuple[Any, ...], int] = {}
        self._freed: dict[tuple[Any, ...], asyncio.Condition] = {}
        self._waiting: dict[tuple[Any, ...], int] = {}
        self._swept = time.monotonic()
        # Upstreams whose flood ended a session: when a new session may be opened again.
        self._cooling: dict[Any, float] = {}

    @contextlib.asynccontextmanager
    async def lease(
        self, config: UpstreamConfig, *, identity: Mapping[str, str], holder: Downstream | None
    ) -> AsyncIterator[PooledSession]:
        """A session of ``config``'s server for the duration of the block, held by ``holder``.
        Raises what connecting raised; a failure inside the block that says the transport failed
        closes the session (and the upstream's idle ones)."""
        pool_key = (config.key, tuple(sorted(identity.items())) if config.pass_identity else ())
        pooled = await self._acquire(config, pool_key, identity)
        pooled.holder = holder
        failed = False
        try:
            yield pooled
        except BaseException as error:
            failed = transport_failed(error)
            if failed:
                # Which session died, and whether it came from the idle pool: what a call that
                # fails on a dead connection needs to be understood afterwards.
                logger.warning(
                    "Upstream %r: a %s session failed at the transport: %r",
                    config.name,
                    "reused" if pooled.reused else "new",
                    error,
                )
            raise
        finally:
            pooled.holder = None
            if failed or not pooled.alive:
                self._close(pooled)
                self._close_idle(pool_key)
            else:
                pooled.idle_since = time.monotonic()
                pooled.reused = True
                self._idle.setdefault(pool_key, []).append(pooled)
            self._notify_freed(pool_key)

    async def _acquire(
        self, config: UpstreamConfig, pool_key: tuple[Any, ...], identity: Mapping[str, str]
    ) -> PooledSession:
        self._cooling_check(config)
        idle_limit = gatehouse_settings.UPSTREAM_IDLE_SECONDS
        self._sweep_idle(idle_limit)
        condition = self._freed.setdefault(pool_key, asyncio.Condition())
        while True:
            idle = self._idle.get(pool_key, [])
            while idle:
                pooled = idle.pop()
                if pooled.alive and time.monotonic() - pooled.idle_since < idle_limit:
                    return pooled
                self._close(pooled)
            if self._open.get(pool_key, 0) < gatehouse_settings.UPSTREAM_POOL_SIZE:
                self._open[pool_key] = self._open.get(pool_key, 0) + 1
                try:
                    return await self._connect(config, pool_key, identity)
                except BaseException:
                    self._open[pool_key] -= 1
                    self._notify_freed(pool_key)
                    raise
            # Woken when a session is freed; the time limit guards against a missed wake-up.
            self._waiting[pool_key] = self._waiting.get(pool_key, 0) + 1
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0), condition:
                        await condition.wait()
            finally:
                self._waiting[pool_key] -= 1

    async def _connect(
        self, config: UpstreamConfig, pool_key: tuple[Any, ...], identity: Mapping[str, str]
    ) -> PooledSession:
        pooled = PooledSession(pool_key=pool_key, config=config)
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        # A context of its own: the session outlives the request that opened it, and must carry
        # none of that request's context (its audit notes, its request id).
        pooled.task = asyncio.get_running_loop().create_task(
            self._run(pooled, identity, ready), context=contextvars.Context()
        )
        # Nobody may be waiting for the outcome any more (the caller gave up): it is read anyway.
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            # The session's task stops itself at its connect time limit; this one is a backstop.
            async with asyncio.timeout(config.connect_timeout + CONNECT_GRACE_SECONDS):
                pooled.session = await asyncio.shield(ready)
        except BaseException:
            # Told to stop rather than cancelled: a native cancel would cut through the shielded
            # cleanup in which the SDK's stdio transport ends its child process.
            pooled.stop.set()
            raise
        return pooled

    async def _run(
        self, pooled: PooledSession, identity: Mapping[str, str], ready: asyncio.Future[ClientSession]
    ) -> None:
        config = pooled.config
        try:
            session_of: list[ClientSession] = []
            async with (
                upstream_streams(config, identity=identity) as (read, write),
                ClientSession(
                    ResultTypeDefaulted(read, version=lambda: _version(session_of)),
                    write,
                    logging_callback=pooled._on_log,
                    elicitation_callback=pooled._on_elicit,
                    sampling_callback=pooled._on_sample,
                    message_handler=self._message_handler(pooled),
                    client_info=CLIENT_INFO,
                ) as session,
            ):
                session_of.append(session)
                with anyio.fail_after(config.connect_timeout):
                    await session_negotiate(session, config)
                if not ready.done():
                    ready.set_result(session)
                await pooled.stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else ConnectionError(str(error)))
            elif not isinstance(error, asyncio.CancelledError):
                logger.info("Upstream %s: session ended: %s", config.label, error_describe(error))
        finally:
            if not ready.done():
                ready.set_exception(ConnectionError("The upstream session ended before it started."))

    def _message_handler(self, pooled: PooledSession) -> MessageHandlerFnT:
        config = pooled.config

        async def handle(message: IncomingMessage) -> None:
            if pooled.ended_because is not None or not isinstance(
                message,
                ToolListChangedNotification | ResourceListChangedNotification | PromptListChangedNotification,
            ):
                return
            if pooled.flood.exceeded():
                pooled.ended_because = FLOODED
                metrics_upstream_notification(upstream=config.label, outcome="flooded")
                logger.warning("Upstream %s: %s.", config.label, FLOODED)
                self._cooling[config.key] = (
                    time.monotonic() + gatehouse_settings.UPSTREAM_FLOOD_COOLDOWN_SECONDS
                )
                self._close(pooled)
                self._close_idle(pooled.pool_key)
                return
            self._on_list_changed(config)

        return handle

    def _cooling_check(self, config: UpstreamConfig) -> None:
        """``UpstreamUnavailable`` while the upstream's flood keeps it from a new session."""
        until = self._cooling.get(config.key)
        if until is None:
            return
        left = until - time.monotonic()
        if left <= 0:
            del self._cooling[config.key]
            return
        raise UpstreamUnavailable(upstream=config.name, reason=COOLING_DOWN.format(seconds=math.ceil(left)))

    def _close(self, pooled: PooledSession) -> None:
        if pooled.stop.is_set():
            return
        pooled.stop.set()
        self._open[pooled.pool_key] = max(0, self._open.get(pooled.pool_key, 0) - 1)

    def _sweep_idle(self, idle_limit: float) -> None:
        """Close every upstream's sessions idle too long or no longer connected, not only this
        lease's: an edited upstream (a new configuration key), a removed one, or a caller who does
        not come back would otherwise keep theirs (and a stdio child) for the life of the process."""
        now = time.monotonic()
        for pool_key in list(self._idle):
            kept = []
            for pooled in self._idle[pool_key]:
                if pooled.alive and now - pooled.idle_since < idle_limit:
                    kept.append(pooled)
                else:
                    self._close(pooled)
            if kept:
                self._idle[pool_key] = kept
            else:
                del self._idle[pool_key]
                if not self._open.get(pool_key) and not self._waiting.get(pool_key):
                    self._open.pop(pool_key, None)
                    self._freed.pop(pool_key, None)

    def _close_idle(self, pool_key: tuple[Any, ...]) -> None:
        for pooled in self._idle.pop(pool_key, []):
            self._close(pooled)

    def _notify_freed(self, pool_key: tuple[Any, ...]) -> None:
        condition = self._freed.get(pool_key)
        if condition is None or not self._waiting.get(pool_key):
            return

        async def wake() -> None:
            async with condition:
                condition.notify()

        asyncio.get_running_loop().create_task(wake())


def elicitation_defaults_applied(
    params: ElicitRequestParams, answer: ElicitResult | ErrorData
) -> ElicitResult | ErrorData:
    """An accepted form with the requested schema's defaults for the fields the client behind
    Gatehouse left out: the client of the upstream is Gatehouse, which applies them (SEP-1034)."""
    schema = getattr(params, "requested_schema", None)
    if not isinstance(answer, ElicitResult) or answer.action != "accept" or not isinstance(schema, dict):
        return answer
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return answer
    content = dict(answer.content or {})
    for name, prop in properties.items():
        if name not in content and isinstance(prop, dict) and "default" in prop:
            content[name] = prop["default"]
    return answer.model_copy(update={"content": content})


def error_describe(error: BaseException) -> str:
    """An upstream failure for the log: its type and message, each one of an exception group's,
    bounded (the SDK's transports raise them wrapped in anyio's groups)."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(error_describe(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}"[:300]


@contextlib.asynccontextmanager
async def session_open(config: UpstreamConfig) -> AsyncIterator[ClientSession]:
    """One session of ``config``'s server, outside any pool, closed after the block: the
    configuration test (admin, command line) uses it."""
    session_of: list[ClientSession] = []
    async with (
        upstream_streams(config, identity={}) as (read, write),
        ClientSession(
            ResultTypeDefaulted(read, version=lambda: _version(session_of)), write, client_info=CLIENT_INFO
        ) as session,
    ):
        session_of.append(session)
        async with asyncio.timeout(config.connect_timeout):
            await session_negotiate(session, config)
        yield session


async def session_negotiate(session: ClientSession, config: UpstreamConfig) -> None:
    """The upstream's protocol: the newest both ends speak, or the handshake when its operator
    chose it (``Upstream.protocol``)."""
    if config.protocol == UpstreamProtocol.HANDSHAKE:
        await session.initialize()
    else:
        await client_session_negotiate(session=session)


def _version(session_of: list[ClientSession]) -> str | None:
    """The protocol version the session (once it exists) negotiated."""
    return session_of[0].protocol_version if session_of else None
