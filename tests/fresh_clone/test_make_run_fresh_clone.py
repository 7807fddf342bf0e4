"""`make run` on a fresh clone, as a newcomer types it: the only test that runs the product on its
embedded SQLite default (the suite itself runs on PostgreSQL).

One clone of the committed HEAD and one `make run` that creates its virtualenv are shared by every
test here (module fixtures; the tests run in any order): a wrong DATABASE_URL and a busy port stop
it in one line before anything else; the running server completes OAuth for the official SDK client
and answers `whoami` and `run_query` (and, for globex, the demo upstream's tools); a second
`make run` reuses the virtualenv, the database and the password; and the `manage.py` commands the
README documents work on that install as written.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import httpx
import httpx2
import pytest
from django.conf import settings
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.harness import Person, parse_form, sdk_client
from tests.fresh_clone.install import WARM_START_LIMIT_SECONDS, FreshInstall, report
from tests.fresh_clone.make_run import (
    FileStamp,
    MakeRun,
    banner_password,
    free_port,
    listening,
    newcomer_env,
    own_lines,
)

# The clone's virtualenv is a full pip install (about 70 s with pip's cache, minutes on a busy
# machine); the first test to need it waits for it.
pytestmark = pytest.mark.timeout(1500)


def _postgres_url(name: str) -> str:
    """An address on the suite's own PostgreSQL server, for a database that does not exist."""
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    user, host, port = db.get("USER") or "postgres", db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{name}"


def test_a_database_that_does_not_exist_stops_it_in_one_line_and_no_server_listens(fresh, request):
    missing = f"gh_fresh_missing_{secrets.token_hex(4)}"
    port = free_port()
    run = fresh.make_run("missing-database", port=port, DATABASE_URL=_postgres_url(missing))
    code = run.wait_exit(timeout=WARM_START_LIMIT_SECONDS)
    report(request, f"missing database refused in {run.figures['exit_seconds']:.1f} s")
    lines = own_lines(run.output())
    assert code != 0
    assert len(lines) == 1, lines
    [line] = lines
    assert f'"{missing}" does not exist' in line
    assert "DATABASE_URL" in line
    assert not listening(port)


def test_a_busy_port_stops_it_in_one_line_before_migrating(fresh, request, tmp_path):
    served = fresh.serving()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        database_before = FileStamp.of(fresh.database)
        static_before = FileStamp.of(fresh.directory / ".local" / "staticfiles")
        runs = [
            fresh.make_run("busy-port", port=port),
            # The same on a database file that does not exist yet: nothing may create it.
            fresh.make_run(
                "busy-port-new-database", port=port, DATABASE_URL=f"sqlite:///{tmp_path / 'never.sqlite3'}"
            ),
        ]
        for run in runs:
            code = run.wait_exit(timeout=WARM_START_LIMIT_SECONDS)
            lines = own_lines(run.output())
            assert code != 0
            assert len(lines) == 1, lines
            [line] = lines
            assert f"Port {port}" in line
            assert "PORT=" in line
        report(request, f"busy port refused in {runs[0].figures['exit_seconds']:.1f} s")
    assert FileStamp.of(fresh.database) == database_before
    assert FileStamp.of(fresh.directory / ".local" / "staticfiles") == static_before
    assert not (tmp_path / "never.sqlite3").exists()
    assert served.running()


def _sample_rows(fresh: FreshInstall, sql: str) -> list[list[object]]:
    """The rows read straight from acme's sample database file, beside the server."""
    sample = fresh.directory / ".local" / "sample_acme.sqlite3"
    with sqlite3.connect(f"{sample.as_uri()}?mode=ro", uri=True) as conn:
        return [list(row) for row in conn.execute(sql).fetchall()]


CUSTOMERS_BY_REGION = (
    "SELECT r.name AS region, count(*) AS customers FROM customers c"
    " JOIN regions r ON r.id = c.region_id GROUP BY r.name ORDER BY r.name"
)


async def _alice_whoami(server: MakeRun, password: str) -> dict:
    async with sdk_client(server, Person("alice", password=password, patient=True)) as (client, storage):
        result = await client.call_tool("whoami", {})
    assert storage.tokens is not None
    assert not result.is_error, result
    return dict(result.structured_content or {})


async def test_the_sdk_client_signs_in_as_alice_calls_whoami_and_run_query_and_refreshes(fresh):
    server = fresh.serving()
    expected = await asyncio.to_thread(_sample_rows, fresh, CUSTOMERS_BY_REGION)
    async with sdk_client(server, Person("alice", password=fresh.password, patient=True)) as (
        client,
        storage,
    ):
        whoami = await client.call_tool("whoami", {})
        catalogue = await client.read_resource("gatehouse://ontologies")
        [ontology] = json.loads(catalogue.contents[0].text)  # type: ignore[union-attr]
        answer = await client.call_tool(
            "run_query", {"ontologyId": ontology["id"], "sql": CUSTOMERS_BY_REGION}
        )
    assert storage.client_info is not None  # registered dynamically
    assert storage.tokens is not None
    assert not whoami.is_error, whoami
    assert whoami.structured_content is not None
    assert whoami.structured_content["user"]["username"] == "alice"
    assert whoami.structured_content["tenant"]["slug"] == "acme"
    assert whoami.structured_content["role"] == "admin"
    assert not answer.is_error, answer
    assert answer.structured_content is not None
    assert expected
    assert answer.structured_content["columns"] == ["region", "customers"]
    assert answer.structured_content["rows"] == expected

    # The client and its person's browser race on one refresh token (several tabs, a retry): inside
    # the grace window each refresh gets a working pair. On SQLite's default locking, nine of ten
    # were a 500 "database is locked" (config/settings.py).
    refreshes = await _refresh_in_parallel(
        server,
        refresh_token=storage.tokens.refresh_token or "",
        client_id=storage.client_info.client_id or "",
    )
    assert [r.status_code for r in refreshes] == [200] * PARALLEL_REFRESHES, [r.text for r in refreshes]
    pairs = {(r.json()["access_token"], r.json()["refresh_token"]) for r in refreshes}
    assert len(pairs) == PARALLEL_REFRESHES
    refreshed = await _whoami_with_token(server, refreshes[-1].json()["access_token"])
    assert refreshed["user"]["username"] == "alice"


PARALLEL_REFRESHES = 10

NORDICS = (
    "SELECT c.name, c.segment, c.signup_date FROM customers c JOIN regions r ON r.id = c.region_id"
    " WHERE r.name = 'Nordics' ORDER BY c.name"
)


async def test_the_workflow_walk_through_works_on_sqlite(fresh):
    """docs/workflows.md's first session, as a newcomer follows it right after `make run`."""
    server = fresh.serving()
    expected = await asyncio.to_thread(_sample_rows, fresh, NORDICS)
    async with sdk_client(server, Person("alice", password=fresh.password, patient=True)) as (client, _):
        started = await client.call_tool("initialize", {})
        commands = await client.call_tool("get_commands", {})
        nordics = await client.call_tool(
            "execute_command", {"command": "customers/CustomersInRegion <region>Nordics</region>"}
        )
        assisted = await client.call_tool("invoke_assistant", {"user_query": "/orders/OrdersByStatus"})
        rotated = await client.call_tool("new_conversation", {})
        listed = await client.call_tool("list_conversations", {})
    for result in (started, commands, nordics, assisted, rotated, listed):
        assert not result.is_error, result
        assert result.structured_content is not None
    assert started.structured_content["workflow_info"]["workflow_name"] == "Sales analyst"
    assert nordics.structured_content["command_responses"][0]["artifacts"]["rows"] == expected
    assert assisted.structured_content["command_name"] == "orders/OrdersByStatus"
    assert rotated.structured_content["summary_source"] == "derived"
    closed = rotated.structured_content["previous_conversation_id"]
    assert closed in [c["conversation_id"] for c in listed.structured_content["conversations"]]


async def test_the_upstream_demo_walk_through_works_on_sqlite(fresh):
    """docs/upstreams.md's demo, as a newcomer follows it right after `make run`: carol (globex)
    sees the demo upstream's tools, prefixed, and converts a temperature through one."""
    server = fresh.serving()
    async with sdk_client(server, Person("carol", password=fresh.password, patient=True)) as (client, _):
        names = {tool.name for tool in (await client.list_tools()).tools}
        converted = await client.call_tool(
            "demo_convert_units", {"value": 100, "from_unit": "C", "to_unit": "F"}
        )
    assert {"demo_roll_dice", "demo_convert_units", "demo_word_count", "whoami"} <= names, names
    assert not converted.is_error, converted
    assert converted.structured_content == {"value": 100.0, "from_unit": "C", "to_unit": "F", "result": 212.0}


def _shell(script: str, *, typed: str) -> dict:
    """Run lines exactly as printed for the reader, in bash (curl is there on a newcomer's
    machine), with ``typed`` as what the reader types at the terminal."""
    completed = subprocess.run(
        ["bash", "-c", script], input=typed + "\n", capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return dict(json.loads(completed.stdout))


async def test_the_llm_gateway_walk_through_works_on_sqlite(fresh):
    """docs/llm-gateway.md's first call, as a newcomer follows it right after `make run`: a service
    client, the token command it prints, the providers, a call. Without a provider's key or the
    internet the call itself is the documented refusal (acme has no key for it)."""
    server = fresh.serving()
    code, out, err = await asyncio.to_thread(
        fresh.manage, "service_client", "create", "acme", "Reporting job", "--role", "contributor",
        PORT=str(fresh.port),
    )  # fmt: skip
    assert code == 0, err
    # The two lines it prints, run as printed; the secret is typed (on stdin), as the first asks.
    lines = out.strip().splitlines()
    secret = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("client_secret:"))
    token_lines = [line.strip() for line in lines[-2:]]
    assert token_lines[0].startswith("read -rs CLIENT_SECRET"), out
    assert "| curl " in token_lines[1], out
    assert secret not in "\n".join(token_lines)
    issued = await asyncio.to_thread(_shell, "\n".join(token_lines), typed=secret)
    assert "llm:invoke" in issued["scope"].split(), issued
    headers = {"Authorization": f"Bearer {issued['access_token']}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60) as http:
        providers = await http.get("/api/v1/providers")
        refused = await http.post(
            "/api/v1/llm/invoke",
            json={
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "messages": [{"role": "user", "content": "Hi"}],
            },
        )
        docs = await http.get("/docs", follow_redirects=True)
    assert providers.status_code == 200, providers.text
    assert {"openai", "anthropic", "deepseek", "gemini", "ollama"} <= {
        p["id"] for p in providers.json()["providers"]
    }
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "not_configured"
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


async def _refresh_in_parallel(
    server: MakeRun, *, refresh_token: str, client_id: str
) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as http:
        return await asyncio.gather(
            *(
                http.post(
                    "/oauth/token/",
                    data={
                        "grant_type": "refresh_token",
                        "refresh_token": refresh_token,
                        "client_id": client_id,
                        "resource": server.mcp_url,
                    },
                )
                for _ in range(PARALLEL_REFRESHES)
            )
        )


async def test_a_second_make_run_reuses_the_virtualenv_the_database_and_the_password(fresh, request):
    first = fresh.runs[0]
    previous = fresh.serving()
    # make run's jobs worker runs beside the server, and stops with it: no orphan left behind.
    workers = await asyncio.to_thread(_jobs_workers_of, fresh)
    await asyncio.to_thread(previous.stop)
    assert not listening(fresh.port)
    assert not [pid for pid in workers if _alive(pid)], "the jobs worker outlived make run"
    second = fresh.make_run("warm")
    warm = await asyncio.to_thread(second.wait_healthy, timeout=WARM_START_LIMIT_SECONDS)
    # The new worker takes a job's first step: it reaches its first checkpoint.
    assert await asyncio.to_thread(_literature_job_first_checkpoint, fresh) == "waiting plan"
    report(
        request,
        f"start to /health: cold {first.figures['healthy_seconds']:.1f} s (virtualenv "
        f"{first.figures.get('watched_seconds', 0):.1f} s of it), warm {warm:.1f} s; "
        f"the previous run stopped by {previous.stopped_by}",
    )
    output = second.output()
    assert "-m venv" not in output
    assert "pip install" not in output
    assert FileStamp.of(fresh.directory / ".venv" / ".installed") == fresh.venv_stamp
    assert FileStamp.of(fresh.directory / ".venv" / "bin" / "python") == fresh.python_stamp
    database = FileStamp.of(fresh.database)
    assert database is not None
    assert fresh.database_stamp is not None
    assert database.inode == fresh.database_stamp.inode
    assert (fresh.directory / ".local" / "secret_key").read_text() == fresh.secret_key
    printed = banner_password(output)
    assert printed in (None, fresh.password)
    # The password of the first run still signs alice in: the database and its people were kept.
    whoami = await _alice_whoami(second, fresh.password)
    assert whoami["user"]["username"] == "alice"


def _jobs_workers_of(fresh: FreshInstall, *, timeout: float = 60) -> list[int]:
    """The ``manage.py jobs_worker`` processes running in the clone (make run's child)."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes()
                directory = os.readlink(entry / "cwd")
            except OSError:
                continue
            if b"jobs_worker" in command and Path(directory) == fresh.directory:
                found.append(int(entry.name))
        if found or time.monotonic() > deadline:
            assert found, "make run started no jobs worker"
            return found
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


_FIRST_CHECKPOINT = """
import time
from accounts.models import Membership
from jobs.models import Job
from jobs.services import job_start
alice = Membership.objects.get(user__username="alice")
job = job_start(tenant_id=alice.tenant_id, user_id=alice.user_id, kind="literature_search",
                job_input={"query": "attention"})
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    job = Job.objects.get(pk=job.pk)
    if job.state != "running":
        break
    time.sleep(0.2)
print(job.state, job.checkpoint_kind)
"""


def _literature_job_first_checkpoint(fresh: FreshInstall) -> str:
    """A literature search started in the clone's database, as it stands after at most a minute."""
    done = subprocess.run(
        [str(fresh.directory / ".venv" / "bin" / "python"), "manage.py", "shell", "-c", _FIRST_CHECKPOINT],
        cwd=fresh.directory,
        env=newcomer_env(SECRET_KEY_FILE=".local/secret_key"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


# The manage.py commands the README and the banner document, on this install, as written.


async def _admin_sign_in(server: MakeRun, username: str, password: str) -> bool:
    async with httpx.AsyncClient(base_url=server.base_url, follow_redirects=False, timeout=30) as browser:
        page = await browser.get("/admin/login/?next=/admin/")
        form = parse_form(page.text)
        fields = {**form["fields"], "username": username, "password": password, "next": "/admin/"}
        answer = await browser.post("/admin/login/?next=/admin/", data=fields)
        if answer.status_code != 302:
            return False
        return (await browser.get(answer.headers["location"])).status_code == 200


async def test_createsuperuser_and_changepassword_work_as_documented(fresh):
    server = fresh.serving()
    first, second = "Op-first-" + secrets.token_hex(6), "Op-second-" + secrets.token_hex(6)
    # As the README and the banner write it: interactive, so it gets a terminal.
    code, transcript = await asyncio.to_thread(
        fresh.manage_at_a_terminal,
        ["createsuperuser"],
        [
            ("Username", "operator"),
            ("Email address:", "operator@example.com"),
            ("Password:", first),
            ("Password (again):", first),
        ],
    )
    assert code == 0, transcript
    assert "Superuser created successfully." in transcript
    assert first not in transcript  # not echoed
    assert await _admin_sign_in(server, "operator", first)

    code, transcript = await asyncio.to_thread(
        fresh.manage_at_a_terminal,
        ["changepassword", "operator"],
        [("Password:", second), ("Password (again):", second)],
    )
    assert code == 0, transcript
    assert "Password changed successfully for user 'operator'" in transcript
    assert second not in transcript
    assert await _admin_sign_in(server, "operator", second)
    assert not await _admin_sign_in(server, "operator", first)


async def test_createsuperuser_noinput_takes_the_account_from_the_environment(fresh):
    # The scripted form (Django's DJANGO_SUPERUSER_* variables), for provisioning.
    server = fresh.serving()
    password = "Op-scripted-" + secrets.token_hex(6)
    code, out, err = await asyncio.to_thread(
        fresh.manage,
        "createsuperuser",
        "--noinput",
        DJANGO_SUPERUSER_USERNAME="scripted",
        DJANGO_SUPERUSER_EMAIL="scripted@example.com",
        DJANGO_SUPERUSER_PASSWORD=password,
    )
    assert code == 0, err
    assert "Superuser created successfully." in out
    assert await _admin_sign_in(server, "scripted", password)


def _mcp_token(fresh: FreshInstall, *args: str) -> tuple[str, str]:
    code, out, err = fresh.manage("mcp_token", *args, PORT=str(fresh.port))
    assert code == 0, err
    assert len(out.splitlines()) == 1, out
    return out.strip(), err


async def _whoami_with_token(server: MakeRun, token: str) -> dict:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http), mode="legacy") as client,
    ):
        result = await client.call_tool("whoami", {})
    assert not result.is_error, result
    return dict(result.structured_content or {})


async def test_mcp_token_gives_a_token_that_calls_whoami_and_revoke_tokens_ends_it(fresh):
    server = fresh.serving()
    alice_token, told = await asyncio.to_thread(_mcp_token, fresh, "alice", "--tenant", "acme")
    assert server.mcp_url in told
    alice = await _whoami_with_token(server, alice_token)
    assert (alice["user"]["username"], alice["tenant"]["slug"], alice["role"]) == ("alice", "acme", "admin")
    bob_token, _ = await asyncio.to_thread(
        _mcp_token, fresh, "bob", "--tenant", "acme", "--scopes", "mcp:read", "--minutes", "15"
    )
    bob = await _whoami_with_token(server, bob_token)
    assert (bob["user"]["username"], bob["role"], bob["scopes"]) == ("bob", "viewer", ["mcp:read"])

    code, out, err = await asyncio.to_thread(fresh.manage, "revoke_tokens", "bob")
    assert "Revoked 1 access token(s)" in out
    assert code == 0, err
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.post(
            server.mcp_url,
            headers={
                "Authorization": f"Bearer {bob_token}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        )
    assert refused.status_code == 401
    assert (await _whoami_with_token(server, alice_token))["user"]["username"] == "alice"


def test_the_operator_commands_work_as_documented(fresh):
    fresh.serving()
    slug = f"initech{secrets.token_hex(3)}"
    steps: list[tuple[tuple[str, ...], str]] = [
        (("create_tenant", slug, "--name", "Initech"), f"Created tenant {slug}"),
        (("add_member", "carol", slug, "--role", "viewer"), "carol is viewer"),
        (("add_member", "carol", slug, "--role", "contributor"), "carol is contributor"),
        (("toolsets", "enable", slug, "data_agent"), "data_agent enabled"),
        (("toolsets", "list", slug), "enabled   data_agent"),
        (("toolsets", "disable", slug, "data_agent"), "data_agent disabled"),
        (("toolsets", "list", slug), "disabled  data_agent"),
        (("revoke_tokens", "carol", "--tenant", slug), "Revoked 0 access token(s)"),
        (("purge", "--dry-run"), "would delete"),
        (("purge",), "Sessions: ended"),
        (("purge_unused_clients", "--dry-run"), "Would delete"),
        (("purge_unused_clients", "--days", "1"), "Deleted 0 unused client(s)"),
        (("audit_spool_replay",), "replayed"),
        (("audit_spool_replay", "--dir", ".local/audit-spool"), "replayed"),
        (("check",), "no issues"),
    ]
    for args, expected in steps:
        code, out, err = fresh.manage(*args)
        assert code == 0, f"manage.py {' '.join(args)}: {err}"
        assert expected in out, f"manage.py {' '.join(args)}: {out}"
        assert "Traceback" not in err


def test_check_deploy_reports_no_issues_for_an_https_public_url(fresh):
    # The README's production check, on this install's own generated key.
    code, out, err = fresh.manage(
        "check",
        "--deploy",
        PUBLIC_URL="https://gatehouse.example.com",
        SECRET_KEY_FILE=str(fresh.directory / ".local" / "secret_key"),
    )
    assert code == 0, err
    assert "no issues" in out, out + err
