"""A desktop client's local process (``manage.py mcp_stdio``) meets the same tools, refusals,
toolsets and audit trail as an OAuth client over HTTP, and its stdout carries protocol only."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db.models import Max
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from accounts.models import Membership, Role, Tenant, User
from accounts.selectors import NO_TENANT, NO_USER
from core.errors import INSUFFICIENT_SCOPE_STDIO
from core.models import AuditAction, AuditEvent, AuditOutcome
from mcp_gateway.management.commands.mcp_stdio import REFUSED_EXIT_CODE
from mcp_gateway.pipeline.guard import UNKNOWN_TOOL, UNPAIRED_SURROGATE
from mcp_gateway.transport.envelope import BODY_TOO_LARGE, MAX_BODY_BYTES
from mcp_gateway.transport.stdio import (
    NOT_JSON,
    NOT_JSON_RPC,
    NOT_MEMBER,
    SCOPES_NOT_HELD,
    STDIO_CLIENT_ID,
    TENANT_INACTIVE,
    USER_INACTIVE,
)
from tests.e2e.conftest import _in_own_thread
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.factories import MembershipFactory

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[3]
MANAGE = str(BASE_DIR / "manage.py")
# The SDK client's own versions: the handshake era and the 2026-07-28 per-request envelope.
MODES = ["legacy", "2026-07-28"]


@pytest.fixture
def member(django_db_blocker) -> Iterator[Callable[..., Membership]]:
    """A membership committed for the server process to see, with its user and tenant, deleted
    after the test."""
    made: list[Membership] = []

    def make(**kwargs: Any) -> Membership:
        with django_db_blocker.unblock():
            membership = _in_own_thread(lambda: MembershipFactory(**kwargs))
        made.append(membership)
        return membership

    yield make

    def clean() -> None:
        for membership in made:
            Membership.objects.filter(pk=membership.pk).delete()
            User.objects.filter(pk=membership.user_id).delete()
            Tenant.objects.filter(pk=membership.tenant_id).delete()

    with django_db_blocker.unblock():
        _in_own_thread(clean)


def stdio_env(server: Any) -> dict[str, str]:
    """What the main server's process runs with (database, secret key, uncached toolsets, no
    default limits), so both transports serve from the same state."""
    return {key: value for key, value in server.env.items() if key != "PORT"}


@asynccontextmanager
async def stdio_client(
    server: Any, user: str, tenant: str = "acme", *extra: str, mode: str = "legacy"
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=[MANAGE, "mcp_stdio", "--user", user, "--tenant", tenant, *extra],
        env=stdio_env(server),
        cwd=str(BASE_DIR),
    )
    async with Client(params, mode=mode) as client:
        yield client


def run_refused(server: Any, *arguments: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, MANAGE, "mcp_stdio", *arguments],
        env=stdio_env(server),
        cwd=BASE_DIR,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("mode", MODES)
async def test_alice_lists_over_stdio_what_she_lists_over_http_and_calls_whoami(server, committed, mode):
    async with minted_sdk_client(committed, server, Person("alice")) as (http, _):
        over_http = sorted(tool.name for tool in (await http.list_tools()).tools)
    async with stdio_client(server, "alice", mode=mode) as client:
        over_stdio = sorted(tool.name for tool in (await client.list_tools()).tools)
        whoami = await client.call_tool("whoami", {})

    assert over_stdio == over_http
    assert "whoami" in over_stdio
    content = whoami.structured_content
    assert content is not None
    assert (content["user"]["username"], content["tenant"]["slug"], content["role"]) == (
        "alice",
        "acme",
        "admin",
    )
    assert content["client"]["client_id"] == STDIO_CLIENT_ID


async def test_a_viewer_is_refused_a_write_tool_with_the_same_error_as_over_http_in_its_own_words(
    server, committed
):
    arguments = {"display_name": "Bobby"}
    async with minted_sdk_client(committed, server, Person("bob")) as (http, _):
        with pytest.raises(MCPError) as over_http:
            await http.call_tool("set_display_name", arguments)
    async with stdio_client(server, "bob") as client:
        with pytest.raises(MCPError) as over_stdio:
            await client.call_tool("set_display_name", arguments)
        assert "set_display_name" not in {tool.name for tool in (await client.list_tools()).tools}

    http_error, stdio_error = over_http.value.error, over_stdio.value.error
    assert (stdio_error.code, stdio_error.data) == (http_error.code, http_error.data)
    # The same refusal, told to each as it applies: a token over HTTP, the session over stdio.
    assert http_error.message.startswith("The access token lacks")
    assert stdio_error.message.startswith(INSUFFICIENT_SCOPE_STDIO)
    assert stdio_error.message.removeprefix(INSUFFICIENT_SCOPE_STDIO) == http_error.message.partition(".")[2]


async def test_narrowed_scopes_hide_and_refuse_what_they_leave_out(server):
    async with stdio_client(server, "alice", "acme", "--scopes", "mcp:read") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("set_display_name", {"display_name": "Al"})
        whoami = await client.call_tool("whoami", {})

    assert "whoami" in names
    assert "set_display_name" not in names
    assert refused.value.error.code == -32001
    # Shown failing before: it spoke of an access token, which a stdio session does not have.
    assert refused.value.error.message.startswith(INSUFFICIENT_SCOPE_STDIO), refused.value.error.message
    assert whoami.structured_content is not None
    assert whoami.structured_content["scopes"] == ["mcp:read"]


async def test_a_tool_of_a_toolset_the_tenant_disabled_is_unknown(server, tenant_toolset):
    tenant_toolset("acme", "account", enabled=False)
    async with stdio_client(server, "alice") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("whoami", {})

    assert "whoami" not in names
    assert refused.value.error.code == -32602
    assert refused.value.error.message == f"{UNKNOWN_TOOL}: whoami"


async def test_calls_are_audited_with_the_stdio_client_and_no_application(server):
    top = (await AuditEvent.objects.aaggregate(top=Max("pk")))["top"] or 0
    async with stdio_client(server, "bob") as client:
        await client.call_tool("whoami", {})
        with pytest.raises(MCPError):
            await client.call_tool("set_display_name", {"display_name": "Bobby"})

    events = [
        event
        async for event in AuditEvent.objects.filter(pk__gt=top, username="bob")
        .select_related("tenant")
        .order_by("pk")
    ]
    assert [(event.action, event.outcome, event.target) for event in events] == [
        (AuditAction.TOOL_CALLED, AuditOutcome.OK, "whoami"),
        (AuditAction.PERMISSION_DENIED, AuditOutcome.DENIED, "set_display_name"),
    ]
    for event in events:
        assert event.client_id == STDIO_CLIENT_ID
        assert event.application_id is None
        assert event.tenant is not None
        assert event.tenant.slug == "acme"
        assert event.session_id == ""


async def test_a_membership_removed_while_serving_refuses_the_next_request(server, member, django_db_blocker):
    membership = member(role=Role.ADMIN)
    async with stdio_client(server, membership.user.username, membership.tenant.slug) as client:
        await client.call_tool("whoami", {})
        with django_db_blocker.unblock():
            _in_own_thread(lambda: Membership.objects.filter(pk=membership.pk).delete())
        with pytest.raises(MCPError) as refused:
            await client.call_tool("whoami", {})

    assert refused.value.error.code == -32001
    assert refused.value.error.message == NOT_MEMBER.format(
        username=membership.user.username, slug=membership.tenant.slug
    )


# Refusals at start: status 2, a message on stderr, and not a byte on stdout.


def assert_refused(result: subprocess.CompletedProcess[bytes], message: str) -> None:
    assert result.returncode == REFUSED_EXIT_CODE, result.stderr.decode()
    assert result.stdout == b""
    assert message in result.stderr.decode()


def test_an_unknown_user_is_refused(server):
    assert_refused(
        run_refused(server, "--user", "nobody", "--tenant", "acme"), NO_USER.format(username="nobody")
    )


def test_an_unknown_tenant_is_refused(server):
    assert_refused(
        run_refused(server, "--user", "alice", "--tenant", "nowhere"), NO_TENANT.format(slug="nowhere")
    )


def test_a_person_who_is_not_a_member_is_refused(server):
    assert_refused(
        run_refused(server, "--user", "carol", "--tenant", "acme"),
        NOT_MEMBER.format(username="carol", slug="acme"),
    )


def test_a_disabled_account_is_refused(server, member):
    membership = member(user__is_active=False)
    username, slug = membership.user.username, membership.tenant.slug
    assert_refused(
        run_refused(server, "--user", username, "--tenant", slug), USER_INACTIVE.format(username=username)
    )


def test_a_deactivated_tenant_is_refused(server, member):
    membership = member(tenant__is_active=False)
    username, slug = membership.user.username, membership.tenant.slug
    assert_refused(
        run_refused(server, "--user", username, "--tenant", slug), TENANT_INACTIVE.format(slug=slug)
    )


def test_scopes_the_role_does_not_hold_are_refused(server):
    assert_refused(
        run_refused(server, "--user", "bob", "--tenant", "acme", "--scopes", "mcp:read mcp:write"),
        SCOPES_NOT_HELD.format(role="viewer", scopes="mcp:write"),
    )


# Hostile input on the raw pipe: every line out is JSON-RPC, and the process keeps serving.


class RawSession:
    """``mcp_stdio`` driven line by line, to see exactly what reaches stdout."""

    def __init__(self, server: Any, user: str = "alice") -> None:
        self.process = subprocess.Popen(
            [sys.executable, MANAGE, "mcp_stdio", "--user", user, "--tenant", "acme"],
            env=stdio_env(server),
            cwd=BASE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: list[bytes] = []

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def request(self, id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message).encode())
        return self.answer(id_)

    def answer(self, id_: int | None) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, "the server closed its stdout"
            self.lines.append(line)
            message = json.loads(line)
            assert message.get("jsonrpc") == "2.0"
            if message.get("id") == id_:
                return message

    def close(self) -> bytes:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.close()
        rest = self.process.stdout.read()
        self.process.wait(timeout=60)
        return rest


def test_hostile_input_gets_json_rpc_errors_and_stdout_carries_only_protocol(server):
    session = RawSession(server)
    try:
        hello = session.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        assert "result" in hello
        session.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

        nul = session.request(
            2, "tools/call", {"name": "set_display_name", "arguments": {"display_name": "a\x00b"}}
        )
        assert nul["error"]["code"] == -32602

        session.send(
            b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":'
            b'{"name":"set_display_name","arguments":{"display_name":"a\\ud800b"}}}'
        )
        surrogate = session.answer(3)
        assert surrogate["error"]["code"] == -32602
        assert surrogate["error"]["data"]["errors"] == [
            {"path": "/display_name", "message": UNPAIRED_SURROGATE}
        ]

        # As over HTTP: a message up to the body limit is read, a longer one refused unread.
        large = session.request(
            4, "tools/call", {"name": "whoami", "arguments": {"padding": "x" * 2_000_000}}
        )
        assert large["result"]["structuredContent"]["user"]["username"] == "alice"
        session.send(
            b'{"jsonrpc":"2.0","id":10,"method":"ping","params":{"p":"' + b"x" * MAX_BODY_BYTES + b'"}}'
        )
        assert session.answer(None)["error"] == {"code": -32600, "message": BODY_TOO_LARGE}

        # Deeper than Python's JSON reader goes is a parse error, without the id it could not read.
        for depth in (500, 3000, 200_000):
            session.send(
                b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"whoami","arguments":{"nested":'
                + b"[" * depth
                + b"]" * depth
                + b"}}}"
            )
            deep = session.answer(5 if depth == 500 else None)
            assert "error" in deep or deep["result"]["structuredContent"]["user"]["username"] == "alice"

        unknown = session.request(6, "tools/call", {"name": "no\x00such\udfff", "arguments": {}})
        assert unknown["error"]["code"] == -32602

        session.send(b"{not json")
        assert session.answer(None)["error"] == {"code": -32700, "message": NOT_JSON}
        session.send(b'{"id": 7, "method": 12}')
        assert session.answer(7)["error"] == {"code": -32600, "message": NOT_JSON_RPC}
        # Bytes that are not UTF-8 are read as replacement characters.
        session.send(b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":"\xff\xfe"}}')
        assert session.answer(9)["result"] == {}

        alive = session.request(8, "tools/call", {"name": "whoami", "arguments": {}})
        assert alive["result"]["structuredContent"]["user"]["username"] == "alice"
    finally:
        rest = session.close()

    for line in [*session.lines, *rest.splitlines()]:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        assert "id" in message or "method" in message
