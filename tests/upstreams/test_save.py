"""Saving an enabled upstream connects to it first: one that is down is refused with the reason, and
one whose tools would take a name another tool has is refused with the prefix that would avoid it.
Secrets are stored encrypted only, and appear in no log line."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import threading
import time

import pytest

from core.crypto import secret_decrypt
from core.errors import InvalidInput
from tests.e2e.harness import free_port
from tests.support.upstream_support import UpstreamProcess, upstream_row
from tests.upstreams.support import stdio_fields, unsaved
from upstreams import selectors
from upstreams.config import config_from_row
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.pool import session_open
from upstreams.services import upstream_remove, upstream_save, upstream_test

pytestmark = pytest.mark.django_db

SERVER_TOOLS = [
    "add_tool",
    "ask_model",
    "ask_name",
    "count_to",
    "echo",
    "fail",
    "flood_list_changed",
    "received_headers",
    "sleep",
]
SECRET = "hdr-s3cr3t-value-91f2"


def test_an_enabled_upstream_is_tested_and_its_published_tool_names_stored(tenant):
    upstream = unsaved(tenant, **stdio_fields(), exclude_tools=["fail"], prefix_tools=True)
    result = upstream_save(upstream=upstream, allow_stdio=True)
    assert result is not None
    assert result.ok
    expected = sorted(f"docs_{name}" for name in SERVER_TOOLS if name != "fail")
    assert result.tool_names == expected
    assert (
        result.tool_count,
        result.resource_count,
        result.resource_template_count,
        result.prompt_count,
    ) == (len(expected), 1, 1, 1)
    assert result.summary == f"{len(expected)} tools, 1 resource, 1 resource template, 1 prompt"
    stored = Upstream.objects.get(pk=upstream.pk)
    assert stored.tool_names == expected
    assert stored.last_tested is not None


def test_an_include_list_publishes_only_those_tools(tenant):
    result = upstream_save(
        upstream=unsaved(tenant, **stdio_fields(), include_tools=["echo", "nope"]), allow_stdio=True
    )
    assert result is not None
    assert result.tool_names == ["echo"]


def test_a_save_and_a_removal_drop_the_processes_cached_configurations(tenant):
    selectors._cache[tenant.pk] = (time.monotonic() + 3600, ())
    upstream = unsaved(tenant, **stdio_fields())
    upstream_save(upstream=upstream, allow_stdio=True)
    assert tenant.pk not in selectors._cache
    selectors._cache[tenant.pk] = (time.monotonic() + 3600, ())
    upstream_remove(upstream=upstream)
    assert tenant.pk not in selectors._cache


def test_a_disabled_upstream_is_saved_without_connecting(tenant):
    upstream = unsaved(tenant, url=f"http://127.0.0.1:{free_port()}/mcp", enabled=False)
    assert upstream_save(upstream=upstream, allow_stdio=False) is None
    stored = Upstream.objects.get(pk=upstream.pk)
    assert stored.last_tested is None
    assert stored.tool_names == []


def test_an_upstream_that_is_down_is_refused_with_the_reason(tenant):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(InvalidInput) as refusal:
        upstream_save(upstream=unsaved(tenant, url=url), allow_stdio=False)
    assert refusal.value.message.startswith(
        f"Connection test failed: could not connect to {url}: connection refused."
    )
    assert not Upstream.objects.exists()


def test_a_command_that_does_not_exist_is_refused_with_its_name(tenant):
    upstream = unsaved(tenant, transport=Transport.STDIO, command="no-such-command-4711")
    with pytest.raises(InvalidInput, match="the command 'no-such-command-4711' was not found"):
        upstream_save(upstream=upstream, allow_stdio=True)


def test_a_tool_name_another_upstream_publishes_is_refused_with_a_prefix_suggested(tenant, outsider):
    upstream_save(
        upstream=unsaved(tenant, name="github", **stdio_fields(), include_tools=["echo"]), allow_stdio=True
    )
    with pytest.raises(InvalidInput) as refusal:
        upstream_save(
            upstream=unsaved(tenant, name="docs", **stdio_fields(), include_tools=["echo", "sleep"]),
            allow_stdio=True,
        )
    assert refusal.value.message == (
        "Tool names already taken: echo (upstream 'github'). "
        "Turn on prefix tools to publish them as docs_echo."
    )
    assert (refusal.value.data or {})["colliding"] == ["echo"]
    assert not Upstream.objects.filter(name="docs").exists()
    # Another tenant's upstreams take no names from this one.
    upstream_save(upstream=unsaved(outsider.tenant, name="docs", **stdio_fields()), allow_stdio=True)


def test_a_disabled_upstream_takes_no_names(tenant):
    upstream_row(
        tenant=tenant.slug, name="github", url="http://127.0.0.1:9/mcp", enabled=False, tool_names=["echo"]
    )
    result = upstream_save(
        upstream=unsaved(tenant, **stdio_fields(), include_tools=["echo"]), allow_stdio=True
    )
    assert result is not None
    assert result.tool_names == ["echo"]


def test_a_tool_named_like_gatehouses_own_is_refused_and_published_with_a_prefix(tenant):
    fields = stdio_fields("--extra-tool", "whoami")
    with pytest.raises(InvalidInput) as refusal:
        upstream_save(upstream=unsaved(tenant, **fields, include_tools=["whoami", "echo"]), allow_stdio=True)
    assert refusal.value.message == (
        "Tool names already taken: whoami (Gatehouse). Turn on prefix tools to publish them as docs_whoami."
    )
    result = upstream_save(
        upstream=unsaved(tenant, **fields, include_tools=["whoami"], prefix_tools=True), allow_stdio=True
    )
    assert result is not None
    assert result.tool_names == ["docs_whoami"]


def test_collisions_with_gatehouse_and_another_upstream_are_listed_together(tenant):
    upstream_save(
        upstream=unsaved(tenant, name="github", **stdio_fields(), include_tools=["echo"]), allow_stdio=True
    )
    fields = stdio_fields("--extra-tool", "whoami")
    with pytest.raises(InvalidInput) as refusal:
        upstream_save(upstream=unsaved(tenant, **fields, include_tools=["echo", "whoami"]), allow_stdio=True)
    assert refusal.value.message == (
        "Tool names already taken: echo (upstream 'github'), whoami (Gatehouse). "
        "Turn on prefix tools to publish them as docs_echo, docs_whoami."
    )


def test_a_prefixed_collision_suggests_excluding_instead(tenant):
    upstream_row(tenant=tenant.slug, name="other", url="http://127.0.0.1:9/mcp", tool_names=["docs_echo"])
    with pytest.raises(
        InvalidInput, match=r"docs_echo \(upstream 'other'\)\. Exclude these tools, or rename"
    ):
        upstream_save(
            upstream=unsaved(tenant, **stdio_fields(), include_tools=["echo"], prefix_tools=True),
            allow_stdio=True,
        )


def test_an_upstream_is_checked_against_the_others_not_itself(tenant):
    upstream = unsaved(tenant, **stdio_fields(), include_tools=["echo"])
    upstream_save(upstream=upstream, allow_stdio=True)
    upstream.call_timeout_seconds = 30
    assert upstream_save(upstream=upstream, allow_stdio=True) is not None


def test_secrets_are_stored_encrypted_and_none_keeps_them(tenant):
    upstream = unsaved(
        tenant,
        **stdio_fields(),
        enabled=False,
        auth=AuthKind.NONE,
        header_name="X-Key",
        oauth_client_id="client",
    )
    upstream_save(
        upstream=upstream,
        allow_stdio=True,
        header_value=SECRET,
        oauth_client_secret="oauth-s3cr3t",
        env={"API_KEY": "env-s3cr3t"},
    )
    stored = Upstream.objects.get(pk=upstream.pk)
    for column, plain in (
        (stored.header_value_encrypted, SECRET),
        (stored.oauth_client_secret_encrypted, "oauth-s3cr3t"),
        (stored.env_encrypted, "env-s3cr3t"),
    ):
        assert plain not in column
    assert secret_decrypt(token=stored.header_value_encrypted) == SECRET
    assert secret_decrypt(token=stored.oauth_client_secret_encrypted) == "oauth-s3cr3t"
    assert json.loads(secret_decrypt(token=stored.env_encrypted)) == {"API_KEY": "env-s3cr3t"}
    upstream_save(upstream=stored, allow_stdio=True)
    again = Upstream.objects.get(pk=upstream.pk)
    assert secret_decrypt(token=again.header_value_encrypted) == SECRET
    upstream_save(upstream=again, allow_stdio=True, header_value="", env={})
    cleared = Upstream.objects.get(pk=upstream.pk)
    assert (cleared.header_value_encrypted, cleared.env_encrypted) == ("", "")


def _received_headers(upstream: Upstream) -> dict[str, str]:
    async def call() -> dict[str, str]:
        async with session_open(config_from_row(upstream)) as session:
            result = await session.call_tool("received_headers", {})
            return dict(result.structured_content or {})

    return asyncio.run(call())


def _assert_not_logged(caplog, secret: str) -> None:
    assert caplog.records, "the test captures the log"
    assert secret not in caplog.text
    assert all(secret not in str(record.__dict__) for record in caplog.records)


def test_the_header_reaches_the_upstream_and_no_log_line(tenant, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    process = UpstreamProcess("http", workdir=tmp_path).start()
    try:
        upstream = unsaved(tenant, url=process.url, auth=AuthKind.HEADER, header_name="X-Upstream-Key")
        result = upstream_save(upstream=upstream, allow_stdio=False, header_value=SECRET)
        assert result is not None
        assert result.tool_names == SERVER_TOOLS
        _assert_not_logged(caplog, SECRET)
        stored = Upstream.objects.select_related("tenant").get(pk=upstream.pk)
        # The SDK logs the upstream's answer at debug level, and this tool answers with the headers.
        assert _received_headers(stored)["x-upstream-key"] == SECRET
        caplog.clear()
        process.kill()
        down = upstream_test(upstream=stored)
        assert down.error == f"could not connect to {process.url}: connection refused"
        _assert_not_logged(caplog, SECRET)
    finally:
        process.kill()


def test_an_sse_upstream_is_tested_over_sse(tenant, tmp_path):
    process = UpstreamProcess("sse", workdir=tmp_path).start()
    try:
        result = upstream_save(
            upstream=unsaved(tenant, transport=Transport.SSE, url=process.url), allow_stdio=False
        )
        assert result is not None
        assert result.tool_names == SERVER_TOOLS
    finally:
        process.kill()


class _Answering(http.server.BaseHTTPRequestHandler):
    """Answers every request with the status in its path's first segment (/401/mcp: 401)."""

    def _answer(self) -> None:
        self.send_response(int(self.path.strip("/").split("/")[0]))
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("transport", "path"), [(Transport.HTTP, "/mcp"), (Transport.SSE, "/sse")])
def test_a_refused_credential_is_said_as_an_authorization_failure(tenant, answering_server, transport, path):
    upstream = unsaved(
        tenant,
        transport=transport,
        url=f"{answering_server}/401{path}?key={SECRET}",
        auth=AuthKind.HEADER,
        header_name="X-Key",
    )
    with pytest.raises(InvalidInput) as refusal:
        upstream_save(upstream=upstream, allow_stdio=False, header_value=SECRET)
    assert refusal.value.message.startswith("Connection test failed: authorization failed (401).")
    assert SECRET not in refusal.value.message


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (404, "nothing at {url} (404)"),
        (500, "{url} answered HTTP 500"),
        (200, "{url} answered an error: Unexpected content type: text/html"),
    ],
)
def test_an_http_answer_that_is_not_mcp_is_said_concisely(tenant, answering_server, status, says):
    url = f"{answering_server}/{status}/mcp"
    result = upstream_test(upstream=unsaved(tenant, url=f"{url}?token=x"))
    assert result.error == says.format(url=url)


def test_a_command_that_exits_at_once_is_said_so(tenant):
    result = upstream_test(upstream=unsaved(tenant, transport=Transport.STDIO, command="false"))
    assert result.error == "the command 'false' exited or closed its output before answering"


def test_an_undecryptable_secret_is_a_failed_test_not_an_error(tenant):
    upstream = upstream_row(
        tenant=tenant.slug,
        name="docs",
        url="http://127.0.0.1:9/mcp",
        auth=AuthKind.HEADER,
        header_name="X-Key",
        header_value_encrypted="not-a-fernet-token",
    )
    result = upstream_test(upstream=upstream)
    assert not result.ok
    assert "cannot be decrypted" in (result.error or "")


def test_a_command_that_never_answers_times_out(tenant):
    upstream = unsaved(
        tenant,
        transport=Transport.STDIO,
        command="sleep",
        args=["600"],
        connect_timeout_seconds=0.5,
        call_timeout_seconds=0.5,
    )
    result = upstream_test(upstream=upstream)
    assert result.error == "timed out after 0.5 s"


def test_removing_an_upstream_deletes_it(tenant):
    upstream = upstream_row(tenant=tenant.slug, name="docs", url="http://127.0.0.1:9/mcp")
    upstream_remove(upstream=upstream)
    assert not Upstream.objects.exists()
