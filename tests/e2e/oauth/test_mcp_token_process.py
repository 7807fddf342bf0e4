"""``manage.py mcp_token``, run as an operator runs it (a process of its own, on the server's
database and settings): the token it prints works at ``/mcp`` as the person, in the tenant, with
the scopes asked for; every refusal is one clear line and a non-zero exit, never a traceback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from core.models import AuditAction, AuditEvent
from oauth.cli_tokens import CLI_CLIENT_ID, CLI_CLIENT_NAME
from oauth.selectors import access_token_find
from tests.e2e.raw_mcp import RawMcp

pytestmark = pytest.mark.django_db


def _mcp_token(server, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    # Bytes arguments reach the command as the operator's shell would pass them, invalid UTF-8 too.
    return subprocess.run(
        [sys.executable, "manage.py", "mcp_token", *args],
        env=server.env,
        capture_output=True,
        timeout=120,
        check=False,
        cwd=settings.BASE_DIR,
    )


async def _issue(server, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return await asyncio.to_thread(_mcp_token, server, *args)


async def _whoami(server, token: str) -> dict:
    mcp = RawMcp(token)
    try:
        session = await mcp.initialize(server.mcp_url, client_name="curl")
        result = await mcp.result(server.mcp_url, "tools/call", {"name": "whoami"}, session_id=session)
    finally:
        await mcp.aclose()
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


def _refused_cleanly(done: subprocess.CompletedProcess[bytes], message: str) -> None:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode != 0
    assert done.stdout == b""
    assert message in err, err
    assert "Traceback" not in err, err


async def test_the_printed_token_calls_whoami_at_mcp_as_the_person_in_the_tenant(server):
    done = await _issue(server, "alice", "--tenant", "acme")
    assert done.returncode == 0, done.stderr.decode()
    token = done.stdout.decode().strip()
    assert "\n" not in token

    me = await _whoami(server, token)

    assert me["user"]["username"] == "alice"
    assert me["tenant"]["slug"] == "acme"
    assert me["role"] == "admin"
    assert me["client"] == {"client_id": CLI_CLIENT_ID, "name": CLI_CLIENT_NAME}
    row = await sync_to_async(access_token_find)(token=token)
    assert row is not None
    assert row.token == ""
    assert row.resource == [server.resource_url]
    assert await AuditEvent.objects.filter(
        action=AuditAction.TOKEN_ISSUED, target=str(row), user__username="alice", tenant__slug="acme"
    ).aexists()


async def test_a_narrowed_token_holds_only_the_scopes_asked_for(server):
    done = await _issue(server, "alice", "--tenant", "acme", "--scopes", "mcp:read", "--minutes", "5")
    assert done.returncode == 0, done.stderr.decode()

    me = await _whoami(server, done.stdout.decode().strip())

    assert me["scopes"] == ["mcp:read"]


async def test_a_person_of_another_tenant_gets_no_token(server):
    done = await _issue(server, "carol", "--tenant", "acme")
    _refused_cleanly(done, "CommandError: User 'carol' is not a member of tenant 'acme'.")


async def test_an_unknown_person_gets_no_token(server):
    _refused_cleanly(await _issue(server, "mallory", "--tenant", "acme"), "No user 'mallory'.")


async def test_a_viewer_cannot_be_given_write(server):
    done = await _issue(server, "bob", "--tenant", "acme", "--scopes", "mcp:write")
    _refused_cleanly(done, "The role 'viewer' does not allow mcp:write")


async def test_invalid_utf8_in_the_username_is_refused_cleanly(server):
    done = await _issue(server, b"al\xffice", "--tenant", "acme")
    _refused_cleanly(done, "The username contains an unpaired surrogate")


def _readme_curl() -> str:
    """The README's curl example, read from the README itself, so the two cannot drift apart."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    start = readme.index("curl -s http://127.0.0.1:8000/mcp")
    return readme[start : readme.index("```", start)]


async def test_the_readme_curl_example_calls_whoami_with_the_printed_token(server):
    done = await _issue(server, "bob", "--tenant", "acme")
    assert done.returncode == 0, done.stderr.decode()
    script = _readme_curl().replace("http://127.0.0.1:8000", server.base_url)

    answered = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "TOKEN": done.stdout.decode().strip()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert answered.returncode == 0, answered.stderr
    # An SSE stream of one message (or, from another server, plain JSON).
    events = [line[5:] for line in answered.stdout.splitlines() if line.startswith("data:")]
    (message,) = [json.loads(event) for event in events] or [json.loads(answered.stdout)]
    me = message["result"]["structuredContent"]
    assert (me["user"]["username"], me["tenant"]["slug"], me["role"]) == ("bob", "acme", "viewer")
