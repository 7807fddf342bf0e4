"""No answered call is missing from the audit trail: not with a NUL in its arguments, not when the
database connections are reset during it, not while the database is unreachable (the row waits in
the spool and is replayed once); and a flood of refusals is counted in a few rows."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection

from core.audit.entry import SANITIZED_KEY
from core.models import AuditAction, AuditEvent, RateLimitScope
from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from tests.e2e.conftest import SERVER_DB_APPLICATION, _serve, person_of
from tests.e2e.harness import Browser, DaphneServer, Person, redirect_params
from tests.e2e.limits.test_rate_limits import rate_limit_rule  # noqa: F401 (a fixture)
from tests.e2e.oauth_driver import OAuthDriver, pkce_pair
from tests.e2e.raw_mcp import RawMcp, sse_messages

pytestmark = pytest.mark.django_db

# Slow enough to be caught running (a few seconds on the demo's 7,000-odd order lines), allowed by
# the SQL gate (no pg_sleep there), well inside run_query's 30-second limit.
SLOW_SQL = (
    "SELECT count(*) AS pairs FROM order_lines a CROSS JOIN order_lines b"
    " WHERE a.quantity * b.unit_price > b.quantity * a.unit_price"
)


@pytest.fixture
def acme_sales(demo) -> Ontology:
    return Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)


class Caller:
    """One person's raw MCP session; every call stamped with its own request id."""

    def __init__(self, server: DaphneServer, token: str) -> None:
        self.server = server
        self.raw = RawMcp(token)
        self.raw.http = httpx.AsyncClient(timeout=60)
        self.session_id = ""

    async def open(self) -> Caller:
        self.session_id = await self.raw.initialize(self.server.mcp_url)
        return self

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The request id and the JSON-RPC answer of one ``tools/call``."""
        request_id = "e2e-" + secrets.token_hex(8)
        body = {
            "jsonrpc": "2.0",
            "id": secrets.randbelow(1 << 30),
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        response = await self.raw.http.post(
            self.server.mcp_url,
            json=body,
            headers={**self.raw.headers(self.session_id), "x-request-id": request_id},
        )
        assert response.status_code == 200, response.text
        (message,) = [m for m in sse_messages(response) if "id" in m]
        return request_id, message

    async def aclose(self) -> None:
        await self.raw.aclose()


async def caller(server: DaphneServer, person: Person, *, scope: str = "mcp:read mcp:write") -> Caller:
    """A person signed in through the browser pages, with a token for ``scope``."""
    driver = OAuthDriver(server)
    browser = Browser(server.base_url)
    try:
        client_id = await driver.register()
        verifier, challenge = pkce_pair()
        response = await browser.authorize(
            driver.authorize_url(client_id=client_id, challenge=challenge, scope=scope),
            username=person.username,
            password=person.password,
            tenant=person.tenant,
        )
        code = redirect_params(response)["code"]
        token = await driver.exchange(client_id=client_id, code=code, verifier=verifier)
        assert token.status_code == 200, token.text
    finally:
        await browser.aclose()
        await driver.aclose()
    return await Caller(server, token.json()["access_token"]).open()


DATA_SCOPES = "mcp:read mcp:write ontologies:read data_agent:write"


async def rows_of(request_ids: list[str]) -> list[AuditEvent]:
    return [event async for event in AuditEvent.objects.filter(request_id__in=request_ids)]


async def test_a_nul_in_run_query_s_sql_is_audited_with_the_escape_visible(server, acme_sales):
    alice = await caller(server, Person("alice"), scope=DATA_SCOPES)
    try:
        request_id, answer = await alice.call(
            "run_query",
            {"ontologyId": str(acme_sales.id), "sql": "SELECT email FROM customers /* \u0000 */ LIMIT 3"},
        )
    finally:
        await alice.aclose()
    assert "result" in answer or "error" in answer
    [event] = await rows_of([request_id])
    assert (event.action, event.target) == (AuditAction.TOOL_CALLED, "run_query")
    assert "/* \\u0000 */" in event.detail["arguments"]["sql"]
    assert "detail" in event.detail[SANITIZED_KEY]


async def test_forty_calls_with_a_nul_do_not_take_forty_clean_calls_of_another_person_with_them(server):
    alice, carol = await asyncio.gather(caller(server, Person("alice")), caller(server, Person("carol")))
    try:
        calls = [alice.call("whoami", {"x": "\u0000"}) for _ in range(40)]
        calls += [carol.call("whoami", {}) for _ in range(40)]
        answered = await asyncio.gather(*calls)
    finally:
        await asyncio.gather(alice.aclose(), carol.aclose())
    request_ids = [request_id for request_id, _ in answered]
    events = await rows_of(request_ids)
    assert sorted(event.request_id for event in events) == sorted(request_ids)
    by_person = {event.username for event in events if SANITIZED_KEY in event.detail}
    assert by_person == {"alice"}


async def test_a_display_name_with_a_nul_is_refused_as_invalid_input_saying_why(server, own_admin):
    person = await caller(server, person_of(own_admin))
    try:
        request_id, answer = await person.call("set_display_name", {"display_name": "Ada\u0000Lovelace"})
    finally:
        await person.aclose()
    assert answer["error"]["code"] == -32602, answer
    assert "NUL" in answer["error"]["message"]
    [event] = await rows_of([request_id])
    assert event.detail["code"] == -32602


def _terminate_server_connections() -> int:
    """Cut the servers' connections to the test database (not this test's, nor data sources')."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database() AND pid <> pg_backend_pid()",
            [SERVER_DB_APPLICATION],
        )
        (killed,) = cursor.fetchone()
    return int(killed)


async def _until_running(call: asyncio.Task[Any]) -> None:
    """Wait until ``run_query`` fetches from acme's sample database (its server-side cursor runs
    the query at the first FETCH)."""
    for _ in range(600):
        if await sync_to_async(_fetching)():
            return
        if call.done():
            raise AssertionError(f"the slow query ended before it was seen: {call.result()}")
        await asyncio.sleep(0.05)
    raise AssertionError("the slow query never started")


def _fetching() -> bool:
    with connection.cursor() as cursor:
        # Inside a transaction the statistics views repeat their first answer: ask afresh.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query ILIKE 'FETCH%%'"
            " AND datname = current_database() || '_sample_acme'"
        )
        (count,) = cursor.fetchone()
    return bool(count)


async def test_a_call_whose_database_connections_are_reset_meanwhile_keeps_its_audit_row(server, acme_sales):
    alice = await caller(server, Person("alice"), scope=DATA_SCOPES)
    try:
        # Every connection of the server's pool in use at least once.
        await asyncio.gather(*[alice.call("whoami", {}) for _ in range(20)])
        slow = asyncio.create_task(
            alice.call("run_query", {"ontologyId": str(acme_sales.id), "sql": SLOW_SQL})
        )
        await _until_running(slow)
        assert await sync_to_async(_terminate_server_connections)() >= 1
        request_id, answer = await slow
    finally:
        await alice.aclose()
    assert "result" in answer, answer
    [event] = await rows_of([request_id])
    assert (event.action, event.target, event.outcome) == (AuditAction.TOOL_CALLED, "run_query", "ok")


# --- The spool: the database unreachable for a while --------------------------------------------


@pytest.fixture
def spool_server(database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(tmp_path_factory, database_url, "spool")


def _spool_dir(server: DaphneServer) -> Path:
    return Path(server.env["AUDIT_SPOOL_DIR"])


class DatabaseGate:
    """Closes the test database to new connections and cuts the servers' ones, then reopens it."""

    def __init__(self) -> None:
        settings = connection.settings_dict
        self.name = settings["NAME"]
        self.admin = psycopg.connect(
            host=settings.get("HOST") or "127.0.0.1",
            port=settings.get("PORT") or 5432,
            user=settings.get("USER") or "postgres",
            password=settings.get("PASSWORD") or None,
            dbname="postgres",
            autocommit=True,
        )
        # Opened before the gate closes: this test keeps reading the table through it.
        self.watch = psycopg.connect(
            host=settings.get("HOST") or "127.0.0.1",
            port=settings.get("PORT") or 5432,
            user=settings.get("USER") or "postgres",
            password=settings.get("PASSWORD") or None,
            dbname=self.name,
            autocommit=True,
        )

    def close(self) -> None:
        self.admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        self.admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = %s",
            [SERVER_DB_APPLICATION, self.name],
        )

    def open(self) -> None:
        self.admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    def rows(self, request_id: str) -> int:
        (count,) = self.watch.execute(
            "SELECT count(*) FROM mcp_gateway_auditevent WHERE request_id = %s", [request_id]
        ).fetchone() or (0,)
        return int(count)

    def dispose(self) -> None:
        self.open()
        self.admin.close()
        self.watch.close()


@pytest.fixture
def database_gate(django_db_blocker) -> Iterator[DatabaseGate]:
    with django_db_blocker.unblock():
        gate = DatabaseGate()
    try:
        yield gate
    finally:
        gate.dispose()


def _metric(server: DaphneServer, name: str) -> float:
    text = httpx.get(f"{server.base_url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_a_row_the_database_cannot_take_is_spooled_then_replayed_exactly_once(
    spool_server, acme_sales, database_gate, tmp_path
):
    alice = await caller(spool_server, Person("alice"), scope=DATA_SCOPES)
    try:
        slow = asyncio.create_task(
            alice.call("run_query", {"ontologyId": str(acme_sales.id), "sql": SLOW_SQL})
        )
        await _until_running(slow)
        await sync_to_async(database_gate.close)()
        request_id, _ = await slow

        # Answered, with its row on disk (not in the table), counted and logged.
        assert database_gate.rows(request_id) == 0
        [spool_file] = list(_spool_dir(spool_server).glob("*.jsonl"))
        [line] = spool_file.read_text().splitlines()
        assert json.loads(line)["request_id"] == request_id
        assert await sync_to_async(_metric)(spool_server, "gatehouse_audit_spooled_total") == 1
        assert await sync_to_async(_metric)(spool_server, "gatehouse_audit_spool_backlog") == 1
        assert "audit row(s) spooled" in spool_server.log()
        copied = tmp_path / "copy"
        copied.mkdir()
        shutil.copy(spool_file, copied / spool_file.name)

        # The database is back: the next call's write succeeds and the server replays the spool.
        await sync_to_async(database_gate.open)()
        await alice.call("whoami", {})
        for _ in range(300):
            if database_gate.rows(request_id):
                break
            await asyncio.sleep(0.2)
    finally:
        await alice.aclose()
    assert database_gate.rows(request_id) == 1
    assert not list(_spool_dir(spool_server).glob("*.jsonl"))
    assert await sync_to_async(_metric)(spool_server, "gatehouse_audit_spool_replayed_total") == 1
    assert await sync_to_async(_metric)(spool_server, "gatehouse_audit_spool_backlog") == 0

    # Replaying the same rows again (a copy of the file) stores nothing twice.
    await sync_to_async(call_command)("audit_spool_replay", "--dir", str(copied))
    assert database_gate.rows(request_id) == 1


# --- A flood of refusals ------------------------------------------------------------------------


@pytest.fixture
def refusal_server(database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(tmp_path_factory, database_url, "refusals", AUDIT_REFUSAL_WINDOW_SECONDS="60")


async def test_a_flood_of_refusals_is_counted_in_a_bounded_number_of_rows(
    refusal_server,
    rate_limit_rule,  # noqa: F811
    own_admin,
):
    rate_limit_rule(scope=RateLimitScope.TOOL, target="whoami", limit=2)
    person = await caller(refusal_server, person_of(own_admin))
    started = time.time()
    try:
        answers = []
        for _ in range(10):
            answers += await asyncio.gather(*[person.call("whoami", {}) for _ in range(20)])
    finally:
        await person.aclose()
    ended = time.time()
    refused = sum(1 for _, answer in answers if answer.get("error", {}).get("code") == -32029)
    assert refused >= 190

    # The last minute's count is written when the process stops.
    await sync_to_async(refusal_server.stop)()
    rows = [
        event
        async for event in AuditEvent.objects.filter(
            action=AuditAction.RATE_LIMITED, username=own_admin.user.username
        )
    ]
    minutes = int(ended // 60) - int(started // 60) + 1
    assert len(rows) <= 2 * minutes
    assert sum(event.detail["count"] for event in rows) == refused
