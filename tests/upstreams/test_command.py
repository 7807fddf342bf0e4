"""``manage.py upstreams add|list|test|remove``: operators configure upstreams from the command
line; a credential comes from stdin, never argv, and no listing shows one. Every refusal is a
message and exit status 1, never a traceback."""

from __future__ import annotations

import io
import os

import pytest
from django.core.management import CommandError, call_command

from core.crypto import secret_decrypt
from tests.e2e.harness import free_port
from tests.support.factories import TenantFactory
from tests.support.python_process import committed_database_url, python_run
from tests.support.upstream_support import UpstreamProcess, stdio_command, upstream_row
from upstreams.models import AuthKind, Transport, Upstream

pytestmark = pytest.mark.django_db

SECRET = "cmd-s3cr3t-0e7a"
# A stdio upstream writes its stderr to this process's (upstreams.transports passes sys.stderr),
# which must then be a real file: these tests read the output with capfd, not capsys.


def _add(*args: str, stdin: str | None = None) -> None:
    options = {"stdin": io.StringIO(stdin)} if stdin is not None else {}
    call_command("upstreams", "add", *args, **options)


def _stdio(*extra: str) -> list[str]:
    command, server_args = stdio_command()
    return ["--command", command, *(f"--arg={a}" for a in [*server_args, *extra])]


def test_add_connects_and_prints_the_tools(tenant, capfd):
    _add(tenant.slug, "docs", *_stdio(), "--exclude", "fail", "--prefix", "--scope", "mcp:write")
    out = capfd.readouterr().out
    assert out.startswith(f"Added upstream 'docs' to {tenant.slug}. Connected: 8 tools: docs_add_tool, ")
    assert out.rstrip().endswith("(and 1 resource, 1 resource template, 1 prompt)")
    upstream = Upstream.objects.get()
    assert (upstream.transport, upstream.prefix_tools, upstream.scopes) == (
        Transport.STDIO,
        True,
        ["mcp:write"],
    )
    assert upstream.exclude_tools == ["fail"]


def test_add_disabled_saves_without_connecting(tenant, capfd):
    _add(
        tenant.slug,
        "docs",
        "--url",
        f"http://127.0.0.1:{free_port()}/mcp",
        "--transport",
        "sse",
        "--disabled",
    )
    assert "disabled (not tested)" in capfd.readouterr().out
    upstream = Upstream.objects.get()
    assert (upstream.transport, upstream.enabled, upstream.scopes) == (Transport.SSE, False, ["mcp:read"])


def test_a_header_value_comes_from_stdin_and_is_stored_encrypted(tenant, capfd):
    _add(
        tenant.slug,
        "docs",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "X-Key",
        "--secret-stdin",
        "--disabled",
        stdin=SECRET + "\n",
    )
    upstream = Upstream.objects.get()
    assert upstream.auth == AuthKind.HEADER
    assert SECRET not in upstream.header_value_encrypted
    assert secret_decrypt(token=upstream.header_value_encrypted) == SECRET
    call_command("upstreams", "list")
    assert SECRET not in capfd.readouterr().out


def test_an_oauth_client_secret_comes_from_stdin(tenant):
    _add(
        tenant.slug,
        "docs",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--oauth-client-id",
        "gatehouse",
        "--secret-stdin",
        "--disabled",
        stdin=SECRET,
    )
    upstream = Upstream.objects.get()
    assert secret_decrypt(token=upstream.oauth_client_secret_encrypted) == SECRET


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--header", "X-Key"], None, "The header's value is read from stdin"),
        (["--oauth-client-id", "id"], None, "The OAuth client secret is read from stdin"),
        (["--secret-stdin"], "x", "only with --header, --query-key or --oauth-client-id"),
        (["--header", "X-Key", "--secret-stdin"], "", "nothing was read from stdin"),
        (["--header", "X-Key", "--oauth-client-id", "id", "--secret-stdin"], "x", "Use one of --header"),
        (["--arg", "x"], None, "--arg: only with --command"),
        (["--env", "A=1"], None, "--env: only with --command"),
        (["--scope", "mcp:root"], None, "scopes: unknown mcp:root"),
        (["--connect-timeout", "nan"], None, "connect_timeout_seconds: must be a number"),
        (["--include", "a\x00b"], None, "include_tools: contains a NUL"),
    ],
)
def test_bad_options_are_refused_with_a_message(tenant, args, stdin, message):
    with pytest.raises(CommandError, match=message):
        _add(tenant.slug, "docs", "--url", "http://127.0.0.1:9/mcp", "--disabled", *args, stdin=stdin)
    assert not Upstream.objects.exists()


def test_a_bad_env_pair_and_a_transport_with_a_command_are_refused(tenant):
    with pytest.raises(CommandError, match="--env: NAME=VALUE expected"):
        _add(tenant.slug, "docs", *_stdio(), "--env", "NOVALUE", "--disabled")
    with pytest.raises(CommandError, match="always stdio"):
        _add(tenant.slug, "docs", *_stdio(), "--transport", "sse", "--disabled")


def test_add_refuses_an_upstream_that_is_down(tenant):
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(CommandError, match=f"could not connect to {url}: connection refused"):
        _add(tenant.slug, "docs", "--url", url)
    assert not Upstream.objects.exists()


def test_add_refuses_a_name_collision_with_the_prefix_suggested(tenant):
    _add(tenant.slug, "github", *_stdio(), "--include", "echo")
    with pytest.raises(
        CommandError, match=r"echo \(upstream 'github'\)\. Turn on prefix tools .* docs_echo\."
    ):
        _add(tenant.slug, "docs", *_stdio(), "--include", "echo")


def test_add_to_an_unknown_tenant_is_refused(db):
    with pytest.raises(CommandError, match="No tenant 'nope'"):
        _add("nope", "docs", "--url", "http://127.0.0.1:9/mcp", "--disabled")


def test_list_shows_each_upstream_without_secrets(tenant, outsider, capfd):
    upstream_row(
        tenant=tenant.slug,
        name="docs",
        url=f"http://example.com/mcp?key={SECRET}",
        tool_names=["a", "b"],
        header_value_encrypted="enc",
        auth=AuthKind.HEADER,
        header_name="X-Key",
    )
    upstream_row(
        tenant=outsider.tenant.slug,
        name="local",
        transport=Transport.STDIO,
        command="/usr/bin/tool",
        args=["--token", SECRET],
        enabled=False,
    )
    call_command("upstreams", "list")
    lines = capfd.readouterr().out.splitlines()
    assert lines[0].split() == ["TENANT", "NAME", "TRANSPORT", "TARGET", "ENABLED", "TOOLS", "LAST", "TESTED"]
    assert lines[1].split() == [tenant.slug, "docs", "http", "http://example.com/mcp?…", "yes", "2", "never"]
    assert lines[2].split()[:5] == [outsider.tenant.slug, "local", "stdio", "/usr/bin/tool", "(+2"]
    assert SECRET not in "\n".join(lines)
    call_command("upstreams", "list", tenant.slug)
    assert "local" not in capfd.readouterr().out


def test_test_prints_the_tools_or_fails_with_the_error(tenant, capfd):
    command, args = stdio_command()
    upstream_row(
        tenant=tenant.slug,
        name="docs",
        transport=Transport.STDIO,
        command=command,
        args=args,
        include_tools=["echo", "sleep"],
    )
    call_command("upstreams", "test", tenant.slug, "docs")
    assert capfd.readouterr().out.startswith("2 tools: echo, sleep (and ")
    upstream_row(tenant=tenant.slug, name="down", url=f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(CommandError, match=r"down: could not connect to .*: connection refused"):
        call_command("upstreams", "test", tenant.slug, "down")


@pytest.mark.parametrize("action", ["test", "remove"])
def test_another_tenants_upstream_is_not_found(tenant, outsider, action):
    upstream_row(tenant=outsider.tenant.slug, name="theirs", url="http://127.0.0.1:9/mcp")
    with pytest.raises(CommandError, match=f"No upstream 'theirs' in {tenant.slug}"):
        call_command("upstreams", action, tenant.slug, "theirs")
    assert Upstream.objects.filter(name="theirs").exists()


@pytest.mark.parametrize("name", ["nul\x00", "\ud800", "x" * 10_000])
def test_a_hostile_name_is_simply_not_found(tenant, name):
    with pytest.raises(CommandError, match="No upstream"):
        call_command("upstreams", "test", tenant.slug, name)


def test_remove_deletes_the_upstream(tenant, capfd):
    upstream_row(tenant=tenant.slug, name="docs", url="http://127.0.0.1:9/mcp")
    call_command("upstreams", "remove", tenant.slug, "docs")
    assert capfd.readouterr().out.strip() == f"Removed upstream 'docs' from {tenant.slug}."
    assert not Upstream.objects.exists()


def test_the_real_command_exits_1_with_a_message_and_no_traceback():
    # An unknown tenant needs no row, so the process needs none of this test's uncommitted ones.
    result = python_run(
        ["manage.py", "upstreams", "test", "no-such-tenant", "docs"],
        env={**os.environ, "DATABASE_URL": committed_database_url()},
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "CommandError: No tenant 'no-such-tenant'."


def test_names_left_out_are_shown_with_the_reason(tenant, capfd):
    """Shown failing before: the test listed all three, and the tenant's clients saw them beside
    ``whoami`` (a Cyrillic o, a zero: each looks like it)."""
    lookalikes = ("wh\u043eami", "wh0ami", "fine_tool")
    extra = [arg for name in lookalikes for arg in ("--extra-tool", name)]
    _add(tenant.slug, "lookalike", *_stdio(*extra), *[f"--include={name}" for name in lookalikes])
    out = capfd.readouterr().out
    assert "Connected: 1 tool: fine_tool" in out, out
    assert "Left out 'wh\u043eami': its name is not 1 to 128 ASCII letters, digits" in out
    assert "Left out 'wh0ami': its name looks like 'whoami', one of Gatehouse's own." in out
    assert Upstream.objects.get().tool_names == ["fine_tool"]


@pytest.mark.django_db(transaction=True)
def test_adding_an_http_upstream_prints_its_answer_and_no_log_line(tmp_path):
    """The real command, in its own process (its logging as an operator has it). Shown failing
    before: the SDK's client wrote '{"level": "INFO", "logger": "mcp.client.streamable_http",
    "message": "Received session ID: ..."}' into the terminal."""
    tenant = TenantFactory.create()
    process = UpstreamProcess("http", workdir=tmp_path).start()
    try:
        result = python_run(
            ["manage.py", "upstreams", "add", tenant.slug, "web", "--url", process.url, "--prefix"],
            env={**os.environ, "DATABASE_URL": committed_database_url()},
        )
    finally:
        process.kill()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Added upstream 'web' to {tenant.slug}. Connected: ")
    assert result.stderr == ""
