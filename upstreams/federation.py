"""Upstream MCP servers as a federation of the MCP endpoint (``mcp_gateway.kernel.federation``): their
entries in the tenant's lists, and each request that names one forwarded through a pooled session.

The request guard has already checked the tenant's toolsets, the caller's scopes, the arguments
against the published input schema and the rate limit, and the audit trail records the call; this
adds the upstream's name to the audit row, counts the call per upstream, and turns whatever the
upstream did wrong into -32005 naming it (the rest of the tenant's tools are unaffected).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import quote

from mcp.client.session import ClientSession
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, LOG_LEVEL_META_KEY, InputResponses, RequestParamsMeta
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from core.db import db_call
from core.errors import InvalidInput, NotFound, UpstreamUnavailable
from core.identity import Identity
from core.text_safety import text_cleaned
from mcp_gateway.kernel.changes import change_record
from mcp_gateway.kernel.federation import FederatedItem, Kind
from mcp_gateway.kernel.sdk import client_input_required_drive
from mcp_gateway.models import ChangeKind
from mcp_gateway.pipeline.audit_trail import audit_note
from upstreams.catalog import Catalog, Published
from upstreams.config import UpstreamConfig
from upstreams.downstream import ForwardedCall
from upstreams.egress import SETTING, exception_egress_refusal
from upstreams.list_changes import ListChangeCoalescer
from upstreams.metrics import metrics_upstream_call
from upstreams.models import Transport
from upstreams.openapi.calls import openapi_call
from upstreams.pool import PooledSession, UpstreamPool, error_describe, session_was_gone
from upstreams.selectors import upstream_configs_async
from upstreams.sign_in.provider import RECONNECT, UpstreamSignInNeeded
from upstreams.transports import TENANT_HEADER, USER_HEADER

logger = logging.getLogger(__name__)

METHODS: dict[Kind, str] = {"tool": "tools/call", "resource": "resources/read", "prompt": "prompts/get"}
# The upstream's own JSON-RPC answers that mean the same to Gatehouse's client (no such method,
# invalid arguments, or the thing named is not there) pass through with its message; any other
# error (the SDK also reports a garbled answer as -32600) is the upstream failing: -32005 naming it.
PASSED_THROUGH = {-32601, InvalidInput.jsonrpc_code, NotFound.jsonrpc_code}
MAX_MESSAGE = 300
CONNECTION_LOST = "its connection closed before it answered (it stopped, or was restarted)"
ADDRESS_REFUSED = (
    "its address is on a private network, which this deployment does not let upstreams reach "
    f"(an operator allows private networks with {SETTING})"
)


class _LoopState:
    """The pool and the catalog of one event loop (sessions and their tasks belong to a loop)."""

    def __init__(self, federation: UpstreamFederation) -> None:
        self.pool = UpstreamPool(on_list_changed=self._list_changed)
        self.catalog = Catalog(pool=self.pool, federation=federation)
        self.coalescer = ListChangeCoalescer(announce=_announce)

    def _list_changed(self, config: UpstreamConfig) -> None:
        """The upstream said its tools, prompts or resources changed: drop this worker's copy, and
        log the change (coalesced: ``upstreams.list_changes``), so every worker's streams of the
        tenant tell their clients."""
        self.catalog.forget(config.key)
        self.coalescer.heard(config)


async def _announce(config: UpstreamConfig) -> None:
    await db_call(change_record, tenant_id=config.tenant_id, kind=ChangeKind.UPSTREAM)


class UpstreamFederation:
    def __init__(self) -> None:
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState(self)
        return state

    async def _published(self, identity: Identity) -> list[tuple[UpstreamConfig, Published]]:
        configs = await upstream_configs_async(tenant_id=identity.tenant_id)
        if not configs:
            return []
        catalog = self._state().catalog
        # Side by side: one slow upstream does not hold up the others.
        published = await asyncio.gather(*(catalog.published(config) for config in configs))
        return list(zip(configs, published, strict=True))

    async def items(self, *, identity: Identity, kind: Kind) -> list[FederatedItem]:
        return [
            item
            for _, published in await self._published(identity)
            for item in published.items.get(kind, {}).values()
        ]

    async def resolve(self, *, identity: Identity, kind: Kind, name: str) -> FederatedItem | None:
        everything = await self._published(identity)
        for _, published in everything:
            item = published.items.get(kind, {}).get(name)
            if item is not None:
                return item
        if kind == "resource":
            for _, published in everything:
                for template, item in published.templates:
                    if template.match(name) is not None:
                        return FederatedItem(
                            kind="resource",
                            name=name,
                            payload={"uri": name},
                            scopes=item.scopes,
                            source=item.source,
                            federation=self,
                            origin=(item.origin[0], name),
                        )
        if kind == "tool":
            # Lists unavailable, but the last test saw this tool: the call goes to the upstream,
            # whose failure the caller then hears about by name.
            for config, published in everything:
                if published.error is not None and name in config.known_tools:
                    original = name.removeprefix(f"{config.name}_") if config.prefix else name
                    return FederatedItem(
                        kind="tool",
                        name=name,
                        payload={"name": name},
                        scopes=config.scopes,
                        source=config.name,
                        federation=self,
                        origin=(config, original),
                    )
        return None

    async def forward(
        self,
        *,
        item: FederatedItem,
        identity: Identity,
        params: dict[str, Any],
        ctx: ServerRequestContext[Any, Any],
    ) -> dict[str, Any]:
        config, original = item.origin
        method = METHODS[item.kind]
        meta = params.get("_meta")
        call = ForwardedCall(
            ctx, progress_token=meta.get("progressToken") if isinstance(meta, dict) else None
        )
        audit_note(upstream=config.name)
        started = time.perf_counter()
        outcome = "error"
        try:
            async with asyncio.timeout(config.call_timeout):
                result = await call.serving(self._send(config, identity, item.kind, original, params, call))
            outcome = "error" if result.get("isError") else "ok"
            return result
        except MCPError as error:
            code, message = error.error.code, text_cleaned(error.error.message)[:MAX_MESSAGE]
            if code in PASSED_THROUGH:
                raise MCPError(code=code, message=message, data={"upstream": config.name}) from None
            outcome = "unavailable"
            raise UpstreamUnavailable(upstream=config.name, reason=_error_reason(code, message)) from None
        except UpstreamUnavailable:
            outcome = "unavailable"
            raise
        except TimeoutError:
            outcome = "unavailable"
            raise UpstreamUnavailable(
                upstream=config.name, reason=f"no answer within {config.call_timeout:g} s"
            ) from None
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as error:
            outcome = "unavailable"
            logger.warning("Upstream %s: %s failed: %s", config.label, method, error_describe(error))
            raise UpstreamUnavailable(upstream=config.name, reason=_reason(error)) from None
        finally:
            metrics_upstream_call(
                upstream=config.label, method=method, outcome=outcome, seconds=time.perf_counter() - started
            )

    async def _send(
        self,
        config: UpstreamConfig,
        identity: Identity,
        kind: Kind,
        original: str,
        params: dict[str, Any],
        call: ForwardedCall,
    ) -> dict[str, Any]:
        if config.transport == Transport.OPENAPI:
            # A REST API: one HTTP request per call, no session to lease.
            return await openapi_call(config=config, tool_name=original, arguments=params.get("arguments"))
        who = {USER_HEADER: quote(identity.username, safe="@.+-_"), TENANT_HEADER: identity.tenant_slug}
        pool = self._state().pool
        for attempt in range(2):
            reused = False
            pooled: PooledSession | None = None
            try:
                async with pool.lease(config, identity=who, holder=call) as pooled:
                    reused = pooled.reused
                    assert pooled.session is not None
                    return await _request(pooled.session, kind, original, params, call, config)
            except MCPError as error:
                if pooled is not None and pooled.ended_because is not None:
                    raise UpstreamUnavailable(upstream=config.name, reason=pooled.ended_because) from None
                # The upstream restarted and forgot the session: the request was not run, so it
                # goes once more, on a new session.
                if attempt == 0 and reused and session_was_gone(error):
                    continue
                raise
        raise AssertionError("unreachable")


async def _request(
    session: ClientSession,
    kind: Kind,
    original: str,
    params: dict[str, Any],
    call: ForwardedCall,
    config: UpstreamConfig,
) -> dict[str, Any]:
    """The upstream's terminal answer. At 2026-07-28 it may first answer ``InputRequiredResult``
    (an elicitation or sampling it needs, with an opaque ``requestState``): that is answered
    through the session's callbacks, hence by the member's client behind Gatehouse, and the request
    sent again, each round a new JSON-RPC request."""
    arguments = params.get("arguments")
    # At 2026-07-28 an upstream sends log messages only for a request that asks for them: every
    # one is asked for, and the caller's own level filters them (``ForwardedCall.log``).
    meta = (
        cast(RequestParamsMeta, {LOG_LEVEL_META_KEY: "debug"})
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS
        else None
    )
    send: Callable[[InputResponses | None, str | None], Awaitable[Any]]
    if kind == "tool":

        async def send(responses: InputResponses | None, state: str | None) -> Any:
            return await session.call_tool(
                original,
                arguments if isinstance(arguments, dict) else None,
                read_timeout_seconds=config.call_timeout,
                progress_callback=call.progress if call.wants_progress else None,
                input_responses=responses,
                request_state=state,
                meta=meta,
                allow_input_required=True,
            )

    elif kind == "resource":

        async def send(responses: InputResponses | None, state: str | None) -> Any:
            return await session.read_resource(
                original, input_responses=responses, request_state=state, meta=meta, allow_input_required=True
            )

    else:
        texts = {str(k): str(v) for k, v in arguments.items()} if isinstance(arguments, dict) else None

        async def send(responses: InputResponses | None, state: str | None) -> Any:
            return await session.get_prompt(
                original,
                texts,
                input_responses=responses,
                request_state=state,
                meta=meta,
                allow_input_required=True,
            )

    result = await client_input_required_drive(session=session, first=await send(None, None), retry=send)
    return cast(dict[str, Any], result.model_dump(by_alias=True, mode="json", exclude_none=True))


def _error_reason(code: int, message: str) -> str:
    if code == CONNECTION_CLOSED:
        # The SDK's own code for a transport that ended, not anything the upstream said.
        return CONNECTION_LOST
    return f"it answered error {code}: {message}"


def _reason(error: BaseException) -> str:
    """What the caller is told: the kind of failure, never the upstream's internals (its URL may
    carry a key)."""
    if exception_egress_refusal(error) is not None:
        # Not the host or its address (the operator's log line has them), only why.
        return ADDRESS_REFUSED
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, UpstreamSignInNeeded):
        # Wrapped (a refresh refused, or a step-up asked for, in the session's own task).
        return RECONNECT
    if isinstance(error, MCPError):
        # Raised while connecting (in the session's own task, hence wrapped): its initialize failed.
        return _error_reason(error.error.code, text_cleaned(error.error.message)[:MAX_MESSAGE])
    if "OAuth" in type(error).__name__:
        return "Gatehouse could not get a token for it from its authorization server"
    if isinstance(error, OSError | ConnectionError) or "Connect" in type(error).__name__:
        return "it could not be reached"
    if isinstance(error, RuntimeError | ValueError):
        return "it answered something that is not a valid MCP result"
    return f"the connection failed ({type(error).__name__})"
