"""The caller of a forwarded request, as the upstream sees it through a leased session: its log
messages, progress notifications and elicitation or sampling requests reach the client on that
request's own response stream (``pool.Downstream``).

The session's callbacks run in the session's own task; everything they hand over is sent from the
forwarding request's task (``serving``), in the request's own context, as a tool's own
notifications are."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INVALID_REQUEST,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    LoggingMessageNotificationParams,
    ProgressToken,
    SamplingCapability,
)
from pydantic import BaseModel

from mcp_gateway.kernel.scope_keys import SESSION_KEY
from mcp_gateway.pipeline.client_log import client_wants

logger = logging.getLogger(__name__)

T = TypeVar("T")
ResultT = TypeVar("ResultT", bound=BaseModel)

NO_ELICITATION = "The client behind Gatehouse does not offer elicitation."
NO_SAMPLING = "The client behind Gatehouse does not offer sampling."
NO_BACK_CHANNEL = (
    "The client's request has no back-channel (protocol 2026-07-28); it cannot be asked mid-call."
)


class ForwardedCall:
    def __init__(self, ctx: ServerRequestContext[Any, Any], *, progress_token: ProgressToken | None) -> None:
        self._ctx = ctx
        self._progress_token = progress_token
        self._queue: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()

    async def serving(self, work: Awaitable[T]) -> T:
        """``work``'s result, while what the upstream hands over is sent to the client."""
        pump = asyncio.get_running_loop().create_task(self._pump())
        try:
            return await work
        finally:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
            # What arrived in the last instant (a final progress) still goes out, in order.
            while not self._queue.empty():
                await self._send(self._queue.get_nowait())

    async def _pump(self) -> None:
        while True:
            await self._send(await self._queue.get())

    @staticmethod
    async def _send(job: Callable[[], Awaitable[None]]) -> None:
        try:
            await job()
        except Exception as error:
            logger.debug("A notification from an upstream was not delivered: %s", error)

    @property
    def wants_progress(self) -> bool:
        return self._progress_token is not None

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        token = self._progress_token
        if token is None:
            return
        ctx = self._ctx
        self._queue.put_nowait(
            lambda: ctx.session.send_progress_notification(
                token, progress, total, message, related_request_id=_str_id(ctx.request_id)
            )
        )

    def log(self, params: LoggingMessageNotificationParams) -> None:
        session = getattr(self._ctx.request, "scope", {}).get(SESSION_KEY)
        requested = getattr(session, "log_level", "") or ""
        if not client_wants(requested=requested, level=params.level):
            return
        ctx = self._ctx
        self._queue.put_nowait(
            lambda: ctx.session.send_log_message(
                params.level, params.data, params.logger, related_request_id=ctx.request_id
            )
        )

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        if not self._ctx.session.check_client_capability(
            ClientCapabilities(elicitation=ElicitationCapability())
        ):
            return ErrorData(code=INVALID_REQUEST, message=NO_ELICITATION)
        return await self._ask(ElicitRequest(params=params), ElicitResult)

    async def sample(self, params: CreateMessageRequestParams) -> CreateMessageResult | ErrorData:
        if not self._ctx.session.check_client_capability(ClientCapabilities(sampling=SamplingCapability())):
            return ErrorData(code=INVALID_REQUEST, message=NO_SAMPLING)
        return await self._ask(CreateMessageRequest(params=params), CreateMessageResult)

    async def _ask(self, request: Any, result_type: type[ResultT]) -> ResultT | ErrorData:
        """Send ``request`` to the client from the forwarding task and wait for its answer."""
        answer: asyncio.Future[ResultT | ErrorData] = asyncio.get_running_loop().create_future()
        ctx = self._ctx

        async def ask() -> None:
            result: ResultT | ErrorData
            try:
                result = await ctx.session.send_request(
                    request, result_type, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
                )
            except NoBackChannelError:
                result = ErrorData(code=INVALID_REQUEST, message=NO_BACK_CHANNEL)
            except MCPError as error:
                result = error.error
            except Exception as error:
                result = ErrorData(
                    code=INVALID_REQUEST, message=f"The client's answer was unusable: {type(error).__name__}"
                )
            if not answer.done():
                answer.set_result(result)

        # Asked in a task of its own, so log messages and progress keep flowing while the person thinks.
        self._queue.put_nowait(lambda: _spawn(ask))
        return await answer


async def _spawn(job: Callable[[], Coroutine[Any, Any, None]]) -> None:
    task = asyncio.get_running_loop().create_task(job())
    _asking.add(task)
    task.add_done_callback(_asking.discard)


_asking: set[asyncio.Task[None]] = set()


def _str_id(request_id: Any) -> str | None:
    return None if request_id is None else str(request_id)
