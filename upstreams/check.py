"""The configuration test of an upstream: connect once, outside the pool, and list what it
publishes. The admin, the command line and every save of an enabled upstream run it, so a wrong
URL, command or credential is refused when it is entered rather than found at a caller's first call.

It runs on an event loop of its own in a thread of its own, so it works the same from a sync view
(which may run under Daphne's loop) and from a management command. A failure is never raised: it
becomes one concise sentence (no traceback, no secret), the anyio exception groups the SDK's
transports raise unwrapped to the error that caused them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, METHOD_NOT_FOUND

from mcp_gateway.kernel.federated_names import DUPLICATE, SHADOWED, NamedKind, name_ledger
from mcp_gateway.kernel.registry import default_registry
from upstreams.catalog import upstream_lists
from upstreams.config import UpstreamConfig, config_from_row
from upstreams.egress import exception_egress_refusal, upstream_http_client
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.oauth import upstream_oauth_forget
from upstreams.openapi.check import openapi_upstream_check
from upstreams.pool import CLIENT_INFO, session_open
from upstreams.transports import upstream_headers

# The thread's own loop is given this much beyond the test's time limit to close its transports.
CLEANUP_SECONDS = 10.0
# What the SDK's Streamable HTTP client makes of an HTTP error status (the status itself is lost).
ERROR_RESPONSE = "Server returned an error response"
NOT_FOUND = "Not Found"
PROBE_PROTOCOL_VERSION = "2025-06-18"


@dataclass(frozen=True)
class UpstreamTestResult:
    ok: bool
    # The tool names as Gatehouse's clients would see them: selected and, if asked, prefixed.
    tool_names: list[str] = field(default_factory=list)
    tool_count: int = 0
    resource_count: int = 0
    resource_template_count: int = 0
    prompt_count: int = 0
    error: str | None = None
    # Tools and prompts a client would not see, and why (``mcp_gateway.kernel.federated_names``).
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def summary(self) -> str:
        """``5 tools, 1 resource, 1 prompt`` (a kind the upstream has none of is left out, but
        tools)."""
        parts = [_count(self.tool_count, "tool")]
        for count, noun in (
            (self.resource_count, "resource"),
            (self.resource_template_count, "resource template"),
            (self.prompt_count, "prompt"),
        ):
            if count:
                parts.append(_count(count, noun))
        return ", ".join(parts)


def left_out_lines(result: UpstreamTestResult) -> list[str]:
    """One sentence per tool or prompt left out of the tenant's lists, for operators."""
    return [f"Left out {name!r}: {why}." for name, why in result.left_out]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def upstream_test(*, upstream: Upstream) -> UpstreamTestResult:
    """Connect to ``upstream`` as it is now (saved or not, secrets as stored on the row), list its
    tools (all pages), resources and prompts, and say what a client would see or why it failed."""
    if upstream.transport == Transport.OPENAPI:
        # No session to open: its tools come from its document (upstreams.openapi.check).
        checked = openapi_upstream_check(upstream=upstream)
        return UpstreamTestResult(
            ok=checked.ok,
            tool_names=checked.tool_names,
            tool_count=len(checked.tool_names),
            error=checked.error,
            left_out=checked.left_out,
        )
    try:
        config = config_from_row(upstream)
    except ValueError as error:
        return UpstreamTestResult(ok=False, error=str(error))
    # A version of its own: the test must neither reuse nor leave behind anything keyed on the
    # configuration (an OAuth token got with the previous secret, say).
    config = dataclasses.replace(config, version=f"test-{uuid.uuid4().hex}")
    total = config.connect_timeout + config.call_timeout
    earlier = _names_listed_before(upstream)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upstream-test")
    try:
        return executor.submit(asyncio.run, _test(config, earlier)).result(timeout=total + CLEANUP_SECONDS)
    except TimeoutError:
        # The loop did not even close in time (a transport stuck in its cleanup): answer anyway,
        # and let the thread finish on its own.
        return UpstreamTestResult(ok=False, error=_timed_out(total))
    finally:
        executor.shutdown(wait=False)
        # OAuth tokens are kept per configuration key; this key is never used again.
        upstream_oauth_forget(key=config.key)


def _names_listed_before(upstream: Upstream) -> list[str]:
    """The tool names of the tenant's upstreams listed before this one (by name, as the lists
    are built), as their last tests found them."""
    rows = Upstream.objects.filter(tenant_id=upstream.tenant_id, enabled=True, name__lt=upstream.name)
    if upstream.pk is not None:
        rows = rows.exclude(pk=upstream.pk)
    return [
        str(name)
        for names in rows.order_by("name").values_list("tool_names", flat=True)
        for name in names or ()
    ]


async def _test(config: UpstreamConfig, earlier: list[str]) -> UpstreamTestResult:
    connected = False
    total = config.connect_timeout + config.call_timeout
    try:
        # anyio's own time limit, not asyncio's: a native task cancel would break through the
        # shield the stdio transport stops its process under, and leave the process behind.
        with anyio.fail_after(total):
            async with session_open(config) as session:
                connected = True
                return await _listed(session, config, earlier)
    except (Exception, BaseExceptionGroup) as error:
        cause = _cause(error)
        if isinstance(cause, TimeoutError | httpx2.TimeoutException):
            return UpstreamTestResult(
                ok=False, error=_timed_out(total if connected else config.connect_timeout)
            )
        return UpstreamTestResult(ok=False, error=await _describe(cause, config))


async def _listed(session: ClientSession, config: UpstreamConfig, earlier: list[str]) -> UpstreamTestResult:
    lists = await upstream_lists(session)
    left_out: list[tuple[str, str]] = []
    shown: dict[str, list[str]] = {}
    kinds: tuple[NamedKind, ...] = ("tool", "prompt")
    for kind in kinds:
        ledger = name_ledger(registry=default_registry(), kind=kind)
        for name in earlier if kind == "tool" else ():
            ledger.take(name)
        originals = [str(entry.get("name", "")) for entry in lists.get(kind, [])]
        if kind == "tool":
            originals = [name for name in originals if config.selects(name)]
        shown[kind] = []
        for name in dict.fromkeys(config.published(original) for original in originals if original):
            why = ledger.left_out(name)
            if why is None:
                ledger.take(name)
                shown[kind].append(name)
            elif why in (SHADOWED, DUPLICATE):
                # A name taken as it is: saving refuses it, naming whose it is (services).
                shown[kind].append(name)
            else:
                left_out.append((name, why))
    names = sorted(shown["tool"])
    return UpstreamTestResult(
        ok=True,
        tool_names=names,
        tool_count=len(names),
        resource_count=len(lists.get("resource", [])),
        resource_template_count=len(lists.get("resource_template", [])),
        prompt_count=len(shown["prompt"]),
        left_out=tuple(left_out),
    )


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _cause(error: BaseException) -> BaseException:
    """The error that made the test fail: the first leaf of the exception groups that is not the
    cancellation of a sibling task."""
    leaves = _leaves(error)
    return next((e for e in leaves if not isinstance(e, asyncio.CancelledError)), leaves[0])


def _timed_out(seconds: float) -> str:
    return f"timed out after {seconds:g} s"


def _where(config: UpstreamConfig) -> str:
    """The URL without its query and fragment, which may carry a key."""
    parts = urlsplit(config.url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def _root(error: BaseException) -> BaseException:
    seen = set()
    while (error.__cause__ or error.__context__) is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return error


async def _describe(error: BaseException, config: UpstreamConfig) -> str:
    if config.transport == Transport.STDIO:
        return _describe_stdio(error, config)
    where = _where(config)
    refusal = exception_egress_refusal(error)
    if refusal is not None:
        return f"could not connect to {where}: {refusal}"
    if isinstance(error, httpx2.ConnectError):
        root = _root(error)
        if isinstance(root, ConnectionRefusedError) or getattr(root, "errno", None) == errno.ECONNREFUSED:
            return f"could not connect to {where}: connection refused"
        if isinstance(root, socket.gaierror):
            return f"could not connect to {where}: unknown host"
        return f"could not connect to {where}: {_short(root)}"
    if isinstance(error, httpx2.HTTPStatusError):
        return _status(error.response.status_code, where)
    if isinstance(error, OAuthFlowError):
        kind = "sign-in" if config.auth == AuthKind.OAUTH_CODE else "client credentials"
        return f"OAuth {kind} failed: {_short(error)}"
    if isinstance(error, httpx2.SSEError):
        return f"{where} is not an MCP SSE endpoint: {_short(error)}"
    if isinstance(error, httpx2.HTTPError):
        return f"could not reach {where}: {_short(error)}"
    if isinstance(error, MCPError):
        if error.error.code == CONNECTION_CLOSED:
            return f"{where} closed the connection"
        if error.error.code == METHOD_NOT_FOUND and error.error.message == NOT_FOUND:
            return _status(404, where)
        if error.error.message == ERROR_RESPONSE and config.auth not in (AuthKind.OAUTH, AuthKind.OAUTH_CODE):
            status = await _http_status(config)
            if status is not None and status >= 400:
                return _status(status, where)
        return f"{where} answered an error: {_short(error.error.message)}"
    return _short(error)


def _describe_stdio(error: BaseException, config: UpstreamConfig) -> str:
    command = _short(config.command, limit=200)
    if isinstance(error, FileNotFoundError | NotADirectoryError):
        if config.cwd and error.filename == config.cwd:
            return f"the working directory {config.cwd!r} does not exist"
        return f"the command {command!r} was not found"
    if isinstance(error, PermissionError):
        return f"the command {command!r} cannot be run (permission denied)"
    if isinstance(error, MCPError):
        if error.error.code == CONNECTION_CLOSED:
            return f"the command {command!r} exited or closed its output before answering"
        return f"the command {command!r} answered an error: {_short(error.error.message)}"
    return f"the command {command!r} failed: {_short(error)}"


def _status(status: int, where: str) -> str:
    if status in (401, 403):
        return f"authorization failed ({status})"
    if status == 404:
        return f"nothing at {where} (404)"
    return f"{where} answered HTTP {status}"


def _short(error: BaseException | str, *, limit: int = 300) -> str:
    text = error if isinstance(error, str) else str(error) or type(error).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _http_status(config: UpstreamConfig) -> int | None:
    """The HTTP status the upstream answers an initialize request with, Gatehouse's credential
    header attached: the SDK's Streamable HTTP client keeps only "an error response"."""
    headers = {
        **upstream_headers(config, identity={}),
        "Accept": "application/json, text/event-stream",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROBE_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": CLIENT_INFO.model_dump(mode="json", exclude_none=True),
        },
    }
    try:
        async with upstream_http_client(timeout=httpx2.Timeout(config.connect_timeout)) as client:
            response = await client.post(config.url, json=body, headers=headers)
    except httpx2.HTTPError:
        return None
    return response.status_code
