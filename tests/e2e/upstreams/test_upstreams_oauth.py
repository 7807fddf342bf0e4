"""An upstream behind its own OAuth authorization server: Gatehouse gets a token with the client
credentials stored for it (discovered from the upstream's metadata, cached, renewed after expiry)
and sends that token, never the caller's; wrong credentials make that upstream's calls -32005 and
leave the rest of the tenant's tools alone. The upstream is ``tests/support/upstream_server.py --oauth``,
its record says which tokens it issued and which reached its tools."""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from urllib.parse import quote

import pytest
from mcp.shared.exceptions import MCPError

from core.crypto import secret_encrypt
from tests.e2e.harness import Person, sdk_client
from tests.support.upstream_support import UpstreamProcess, upstream_row
from tests.support.waiting import clock_past

pytestmark = pytest.mark.django_db

CLIENT_ID = "gatehouse-at-vendor"
# A colon and a percent sign: the Basic credentials must be form-encoded to arrive intact.
CLIENT_SECRET = "vendor:secret%" + secrets.token_hex(12)
SHORT_TOKEN_SECONDS = 2


def _process_at(
    workdir, *, port: int | None, token_seconds: int = 3600, options: tuple[str, ...] = ()
) -> UpstreamProcess:
    return UpstreamProcess(
        "http",
        workdir=workdir,
        port=port,
        options=("--oauth", f"{CLIENT_ID}:{CLIENT_SECRET}", "--token-seconds", str(token_seconds), *options),
    ).start()


def _process(tmp_path_factory, *, token_seconds: int) -> UpstreamProcess:
    return _process_at(tmp_path_factory.mktemp("upstream-oauth"), port=None, token_seconds=token_seconds)


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    """Tokens live an hour here."""
    process = _process(tmp_path_factory, token_seconds=3600)
    yield process
    process.kill()


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory):
    """Tokens live two seconds here."""
    process = _process(tmp_path_factory, token_seconds=SHORT_TOKEN_SECONDS)
    yield process
    process.kill()


def _oauth_row(committed, process: UpstreamProcess, *, name: str, secret: str = CLIENT_SECRET, **fields):
    return committed(
        upstream_row,
        tenant="acme",
        name=name,
        url=process.url,
        prefix_tools=True,
        auth="oauth",
        oauth_client_id=CLIENT_ID,
        oauth_client_secret_encrypted=secret_encrypt(plaintext=secret),
        **fields,
    )


def _issued(process: UpstreamProcess) -> list[str]:
    return [r["token"] for r in process.records() if r.get("event") == "token_issued"]


def _echo_authorizations(process: UpstreamProcess) -> list[str]:
    return [r["headers"].get("authorization", "") for r in process.records() if r.get("tool") == "echo"]


def _secret_forms(secret: str) -> list[str]:
    basic = base64.b64encode(f"{quote(CLIENT_ID, safe='')}:{quote(secret, safe='')}".encode()).decode()
    return [secret, quote(secret, safe=""), basic]


async def test_calls_carry_one_token_the_upstream_issued_never_the_callers(server, committed, vendor):
    _oauth_row(committed, vendor, name="vendor")
    async with sdk_client(server, Person("alice")) as (client, storage):
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "vendor_echo" in names, names
        for i in range(3):
            result = await client.call_tool("vendor_echo", {"text": f"hello {i}"})
            assert result.structured_content["text"] == f"hello {i}", result
        assert storage.tokens is not None
        caller_token = storage.tokens.access_token

    issued = _issued(vendor)
    assert len(issued) == 1, issued
    authorizations = _echo_authorizations(vendor)
    assert authorizations == [f"Bearer {issued[0]}"] * 3, authorizations
    # RFC 8707: the token was asked for the upstream's own resource.
    assert [r["resource"] for r in vendor.records() if r.get("event") == "token_issued"] == [vendor.url]
    assert all(caller_token not in str(record) for record in vendor.records())
    log = server.log()
    for form in _secret_forms(CLIENT_SECRET):
        assert form not in log


async def test_an_expired_token_is_replaced_and_calls_go_on(server, committed, short_lived):
    _oauth_row(committed, short_lived, name="brief")
    echoes_before = len(_echo_authorizations(short_lived))
    async with sdk_client(server, Person("alice")) as (client, _):
        first = await client.call_tool("brief_echo", {"text": "before"})
        assert first.structured_content["text"] == "before", first
        # Past the token's lifetime as Gatehouse counts it, from when it got the token (before the
        # first call came back): the second call comes after the first token has expired.
        await clock_past(time.time() + SHORT_TOKEN_SECONDS)
        second = await client.call_tool("brief_echo", {"text": "after"})
        assert second.structured_content["text"] == "after", second

    issued = _issued(short_lived)
    authorizations = _echo_authorizations(short_lived)[echoes_before:]
    assert len(authorizations) == 2, authorizations
    assert len(set(authorizations)) == 2, authorizations
    assert all(a.removeprefix("Bearer ") in issued for a in authorizations), (authorizations, issued)


async def test_concurrent_calls_across_an_expiry_all_carry_tokens_the_upstream_issued(
    server, committed, short_lived
):
    _oauth_row(committed, short_lived, name="busy")
    async with sdk_client(server, Person("alice")) as (client, _):
        first = await asyncio.gather(*(client.call_tool("busy_echo", {"text": str(i)}) for i in range(6)))
        await clock_past(time.time() + SHORT_TOKEN_SECONDS)
        second = await asyncio.gather(*(client.call_tool("busy_echo", {"text": str(i)}) for i in range(6)))
    assert [r.structured_content["text"] for r in first + second] == [str(i) for i in range(6)] * 2
    issued = {f"Bearer {token}" for token in _issued(short_lived)}
    authorizations = _echo_authorizations(short_lived)[-12:]
    assert set(authorizations) <= issued, authorizations
    assert authorizations[0] != authorizations[-1]


async def test_wrong_client_secret_fails_that_upstreams_calls_only(server, committed, vendor):
    wrong = "not-the-" + secrets.token_hex(8)
    # The tools (as published) its last test found: a call still reaches the upstream when its
    # lists cannot be had.
    _oauth_row(committed, vendor, name="refused", secret=wrong, tool_names=["refused_echo"])
    refusals_before = sum(1 for r in vendor.records() if r.get("event") == "token_refused")
    echoes_before = len(_echo_authorizations(vendor))
    async with sdk_client(server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as failed:
            await client.call_tool("refused_echo", {"text": "hi"})
        whoami = await client.call_tool("whoami", {})

    assert failed.value.error.code == -32005, failed.value.error
    assert "'refused'" in failed.value.error.message, failed.value.error
    assert not whoami.is_error, whoami
    assert sum(1 for r in vendor.records() if r.get("event") == "token_refused") > refusals_before
    assert len(_echo_authorizations(vendor)) == echoes_before
    log = server.log()
    for form in _secret_forms(wrong):
        assert form not in log


@pytest.mark.parametrize(
    "secret",
    ["nul\x00byte", "x" * 5000, "ünïcødé-秘密 \r\nX-Injected: 1"],
    ids=["nul", "huge", "unicode-and-crlf"],
)
async def test_hostile_client_secrets_fail_as_the_upstreams_error(server, committed, vendor, secret):
    """A stored secret no authorization server would accept is sent form-encoded (so it can break
    no header) and refused by the upstream's token endpoint: that upstream's call is -32005 and
    Gatehouse carries on."""
    _oauth_row(committed, vendor, name="hostile", secret=secret, tool_names=["hostile_echo"])
    async with sdk_client(server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as failed:
            await client.call_tool("hostile_echo", {"text": "hi"})
        whoami = await client.call_tool("whoami", {})
    assert failed.value.error.code == -32005, failed.value.error
    assert not whoami.is_error, whoami


async def test_after_the_upstream_restarts_and_forgets_its_tokens_a_new_one_is_fetched(
    server, committed, tmp_path
):
    first = _process_at(tmp_path, port=None)
    try:
        _oauth_row(committed, first, name="restarting")
        async with sdk_client(server, Person("alice")) as (client, _):
            before = await client.call_tool("restarting_echo", {"text": "before"})
            first.kill()
            again = _process_at(tmp_path, port=first.port)
            try:
                after = await client.call_tool("restarting_echo", {"text": "after"})
            finally:
                again.kill()
    finally:
        first.kill()
    assert before.structured_content["text"] == "before", before
    assert after.structured_content["text"] == "after", after
    # One record file for both lives of the upstream (it is named by the port).
    issued = _issued(first)
    assert len(issued) == 2, issued
    assert _echo_authorizations(first) == [f"Bearer {token}" for token in issued]


async def test_an_sse_upstream_gets_its_token_too(server, committed, tmp_path):
    process = UpstreamProcess(
        "sse",
        workdir=tmp_path,
        options=("--oauth", f"{CLIENT_ID}:{CLIENT_SECRET}", "--token-seconds", "3600"),
    ).start()
    try:
        _oauth_row(committed, process, name="legacy", transport="sse")
        async with sdk_client(server, Person("alice")) as (client, _):
            result = await client.call_tool("legacy_echo", {"text": "over sse"})
    finally:
        process.kill()
    assert result.structured_content["text"] == "over sse", result
    (token,) = _issued(process)
    assert _echo_authorizations(process) == [f"Bearer {token}"]


async def test_the_credentials_never_follow_the_upstream_to_another_authorization_server(
    server, committed, tmp_path
):
    """The issuer found on the first connection is pinned: an upstream that later names another
    authorization server in its metadata gets -32005, and that server never sees the secret."""
    elsewhere = _process_at(tmp_path, port=None)
    first = _process_at(tmp_path, port=None)
    try:
        _oauth_row(committed, first, name="pinned")
        async with sdk_client(server, Person("alice")) as (client, _):
            before = await client.call_tool("pinned_echo", {"text": "before"})
            first.kill()
            # Restarted, it has forgotten its tokens, and sends clients to another server.
            turned = _process_at(
                tmp_path,
                port=first.port,
                options=("--advertise-issuer", f"http://127.0.0.1:{elsewhere.port}/"),
            )
            try:
                with pytest.raises(MCPError) as failed:
                    await client.call_tool("pinned_echo", {"text": "after"})
            finally:
                turned.kill()
    finally:
        first.kill()
        elsewhere.kill()
    assert before.structured_content["text"] == "before", before
    assert failed.value.error.code == -32005, failed.value.error
    assert "'pinned'" in failed.value.error.message
    assert not [r for r in elsewhere.records() if r.get("event", "").startswith("token")], elsewhere.records()


async def test_a_token_endpoint_answering_junk_fails_that_upstreams_calls_only(server, committed, tmp_path):
    process = _process_at(tmp_path, port=None, options=("--garbage-tokens",))
    try:
        _oauth_row(committed, process, name="junk", tool_names=["junk_echo"])
        async with sdk_client(server, Person("alice")) as (client, _):
            with pytest.raises(MCPError) as failed:
                await client.call_tool("junk_echo", {"text": "hi"})
            whoami = await client.call_tool("whoami", {})
    finally:
        process.kill()
    assert failed.value.error.code == -32005, failed.value.error
    assert "'junk'" in failed.value.error.message
    assert not whoami.is_error, whoami
    assert any(r.get("event") == "token_garbage" for r in process.records())
    assert not _echo_authorizations(process)
