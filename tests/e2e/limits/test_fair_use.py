"""Fair use of data sources through Daphne (issue 13, item 3): one person's slow queries cannot
starve anyone else's, a person or tenant over its cap of concurrent queries is refused at once
with -32029 and a retry hint, every slot comes back, and ``run_query`` has the usual tool limit,
which the SQL gate's refusals do not spend.
Also a viewer reading their own data preferences, and a NUL refused by the preferences tool.

The slow queries wait on a lock the test holds on the demo's ``regions`` table, so they cost no
CPU and end at the query timeout exactly as a long query would (the gate refuses ``pg_sleep``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any

import psycopg
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from psycopg.conninfo import conninfo_to_dict

from accounts.models import Role, Tenant
from core.db import psycopg_connect_kwargs
from data_agent.models import AgentPreference, Ontology
from data_agent.sample import ONTOLOGY_NAME
from data_agent.selectors import data_source_url
from tests.e2e.conftest import _serve, person_of
from tests.e2e.harness import ACME_VIEWER_TOOLS, DaphneServer, MemoryTokenStorage, Person, RoundRobin
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.factories import MembershipFactory

pytestmark = pytest.mark.django_db

SLOW_SECONDS = 6
PER_PERSON, PER_TENANT, TOOL_PER_MINUTE = 2, 3, 6
SLOW = "SELECT count(*) AS n FROM regions"
TRIVIAL = "SELECT count(*) AS n FROM orders"
RATE_LIMITED, TIMED_OUT, INVALID, FORBIDDEN = -32029, -32004, -32602, -32001


# Queries time out after SLOW_SECONDS, with small caps, and a small default limit for tools.
FAIR_USE_ENV = {
    "DATA_AGENT_QUERY_TIMEOUT_SECONDS": str(SLOW_SECONDS),
    "DATA_AGENT_CONCURRENT_QUERIES_PER_PERSON": str(PER_PERSON),
    "DATA_AGENT_CONCURRENT_QUERIES_PER_TENANT": str(PER_TENANT),
    "RATE_LIMIT_TOOL": f"{TOOL_PER_MINUTE}/minute",
}


@pytest.fixture(scope="module")
def fair_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(tmp_path_factory, database_url, "fair-use", **FAIR_USE_ENV)


@pytest.fixture(scope="module")
def second_fair_server(fair_server, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """Another process behind the same public URL, sharing the database and Redis."""
    yield from _serve(
        tmp_path_factory, database_url, "fair-use-second", public_url=fair_server.public_url, **FAIR_USE_ENV
    )


@pytest.fixture
def acme_sales(demo) -> Ontology:
    return Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)


@pytest.fixture
def acme(demo) -> Tenant:
    return Tenant.objects.get(slug="acme")


@pytest.fixture
def acme_contributor(committed, acme) -> Callable[[], Person]:
    """A new contributor of acme (may run queries), so no test spends another's query budget."""
    return lambda: person_of(committed(MembershipFactory, tenant=acme, role=Role.CONTRIBUTOR))


def _source_admin_kwargs(ontology: Ontology) -> dict[str, Any]:
    # The data source's own role may only read; locking a table needs the test database's owner.
    dbname = conninfo_to_dict(data_source_url(data_source=ontology.data_source))["dbname"]
    return {**psycopg_connect_kwargs(), "dbname": dbname}


@contextmanager
def regions_locked(ontology: Ontology) -> Iterator[Callable[[int], Awaitable[None]]]:
    """Hold a lock every query of ``regions`` waits on; yields a wait for N such queries waiting."""
    kwargs = _source_admin_kwargs(ontology)
    with psycopg.connect(**{**kwargs, "autocommit": False}) as holder:
        holder.execute("LOCK TABLE regions IN ACCESS EXCLUSIVE MODE")

        async def waiting(count: int) -> None:
            deadline = time.monotonic() + 30
            with psycopg.connect(**kwargs) as watcher:
                while time.monotonic() < deadline:
                    row = watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock'"
                    ).fetchone()
                    if row is not None and row[0] >= count:
                        return
                    await asyncio.sleep(0.1)
            raise AssertionError(f"fewer than {count} queries ever waited on the lock")

        yield waiting
        holder.rollback()


@asynccontextmanager
async def sessions(
    committed: Callable[..., Any], server: DaphneServer, person: Person, count: int
) -> AsyncIterator[list[Client]]:
    """``count`` MCP sessions of one person, with one token. One SDK client sends its calls one at
    a time, so concurrent calls come from several, as from several windows of one application."""
    storage = MemoryTokenStorage()
    async with AsyncExitStack() as stack:
        clients = [minted_sdk_client(committed, server, person, storage=storage) for _ in range(count)]
        yield [(await stack.enter_async_context(client))[0] for client in clients]


async def _timed(call: Awaitable[Any]) -> tuple[float, Any]:
    """When the call ended (monotonic), and its result or MCP error."""
    try:
        outcome = await call
    except MCPError as error:
        outcome = error
    return time.monotonic(), outcome


def _query(ontology: Ontology, sql: str) -> dict[str, str]:
    return {"ontologyId": str(ontology.id), "sql": sql}


def _assert_refused(error: Any, *, limit: str) -> None:
    assert isinstance(error, MCPError), error
    assert error.error.code == RATE_LIMITED, error.error
    assert error.error.data["limit"] == limit
    assert 1 <= error.error.data["retryAfterSeconds"] <= SLOW_SECONDS


async def test_one_person_s_slow_queries_are_capped_and_cannot_starve_another_s(
    fair_server, committed, acme_sales, acme_contributor
):
    dora, erin = acme_contributor(), acme_contributor()
    async with (
        sessions(committed, fair_server, dora, PER_PERSON + 2) as dora_clients,
        minted_sdk_client(committed, fair_server, erin) as (erin_client, _),
    ):
        with regions_locked(acme_sales) as waiting:
            started = time.monotonic()
            slow = [
                asyncio.create_task(_timed(client.call_tool("run_query", _query(acme_sales, SLOW))))
                for client in dora_clients
            ]
            await waiting(PER_PERSON)
            erin_started = time.monotonic()
            erin_ended, erin_answer = await _timed(
                erin_client.call_tool("run_query", _query(acme_sales, TRIVIAL))
            )
            outcomes = await asyncio.gather(*slow)
        # Once the slow ones have timed out, their slots are free again.
        follow_up = await dora_clients[0].call_tool("run_query", _query(acme_sales, TRIVIAL))

    refused = [
        (ended, outcome)
        for ended, outcome in outcomes
        if isinstance(outcome, MCPError) and outcome.error.code == RATE_LIMITED
    ]
    timed_out = [(ended, outcome) for ended, outcome in outcomes if (ended, outcome) not in refused]
    assert len(refused) == 2
    for ended, error in refused:
        _assert_refused(error, limit=f"{PER_PERSON} concurrent queries per person")
        assert ended - started < SLOW_SECONDS / 2  # at once, not queued behind the slow ones
    assert len(timed_out) == PER_PERSON
    for _, error in timed_out:
        assert isinstance(error, MCPError), error
        assert error.error.code == TIMED_OUT, error
    # Erin's query answered while dora's still waited, well before they ended.
    assert not erin_answer.is_error
    assert erin_ended - erin_started < SLOW_SECONDS / 2
    assert erin_ended < min(ended for ended, _ in timed_out)
    assert not follow_up.is_error


async def test_a_tenant_over_its_cap_is_refused_whoever_asks_until_a_query_ends(
    fair_server, committed, acme_sales, acme_contributor
):
    frank, gina, hank = acme_contributor(), acme_contributor(), acme_contributor()
    async with (
        sessions(committed, fair_server, frank, 2) as frank_clients,
        minted_sdk_client(committed, fair_server, gina) as (gina_client, _),
        minted_sdk_client(committed, fair_server, hank) as (hank_client, _),
    ):
        with regions_locked(acme_sales) as waiting:
            slow = [
                asyncio.create_task(_timed(client.call_tool("run_query", _query(acme_sales, SLOW))))
                for client in (*frank_clients, gina_client)
            ]
            await waiting(PER_TENANT)
            started = time.monotonic()
            ended, refusal = await _timed(hank_client.call_tool("run_query", _query(acme_sales, TRIVIAL)))
            outcomes = await asyncio.gather(*slow)
        after = await hank_client.call_tool("run_query", _query(acme_sales, TRIVIAL))

    _assert_refused(refusal, limit=f"{PER_TENANT} concurrent queries per tenant")
    assert ended - started < SLOW_SECONDS / 2
    assert [outcome.error.code for _, outcome in outcomes] == [TIMED_OUT] * PER_TENANT
    assert not after.is_error


async def test_a_person_s_cap_holds_across_server_processes(
    fair_server, second_fair_server, committed, acme_sales, acme_contributor
):
    kate = acme_contributor()
    # Every request of this client goes to the second process, as a load balancer might send it.
    to_second = RoundRobin([second_fair_server.port])
    async with (
        sessions(committed, fair_server, kate, PER_PERSON) as first_process,
        minted_sdk_client(committed, fair_server, kate, transport=to_second) as (second_process, _),
    ):
        with regions_locked(acme_sales) as waiting:
            slow = [
                asyncio.create_task(_timed(client.call_tool("run_query", _query(acme_sales, SLOW))))
                for client in first_process
            ]
            await waiting(PER_PERSON)
            started = time.monotonic()
            ended, refusal = await _timed(second_process.call_tool("run_query", _query(acme_sales, TRIVIAL)))
            outcomes = await asyncio.gather(*slow)
        after = await second_process.call_tool("run_query", _query(acme_sales, TRIVIAL))

    _assert_refused(refusal, limit=f"{PER_PERSON} concurrent queries per person")
    assert ended - started < SLOW_SECONDS / 2
    assert [outcome.error.code for _, outcome in outcomes] == [TIMED_OUT] * PER_PERSON
    assert not after.is_error
    assert set(to_second.served) == {second_fair_server.port}


async def test_a_refused_or_failing_query_gives_its_slot_back(
    fair_server, committed, acme_sales, acme_contributor
):
    async with minted_sdk_client(committed, fair_server, acme_contributor()) as (client, _):
        failures = []
        for sql in (
            "SELECT 1 / (count(*) - count(*)) FROM orders",
            "SELECT nope FROM orders",
            "DELETE FROM orders",
        ):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("run_query", _query(acme_sales, sql))
            failures.append(refused.value.error.code)
        answer = await client.call_tool("run_query", _query(acme_sales, TRIVIAL))
    # More failures in a row than the person's cap: a leaked slot would have refused the third.
    assert failures == [INVALID] * 3
    assert not answer.is_error


async def test_run_query_has_the_usual_tool_limit_and_what_the_sql_gate_refuses_costs_nothing(
    fair_server, committed, acme_sales, acme_contributor
):
    """Shown failing before: run_query had the "expensive" default (5 a minute), and each query the
    gate refused was counted, so a person exploring data was refused at the fourth or so."""
    async with minted_sdk_client(committed, fair_server, acme_contributor()) as (client, _):
        gated = []
        for sql in ("DELETE FROM orders", "SELECT * FROM pg_authid", "SELECT 1; SELECT 2") * 3:
            with pytest.raises(MCPError) as refused_by_gate:
                await client.call_tool("run_query", _query(acme_sales, sql))
            gated.append(refused_by_gate.value.error.code)
        answers = [
            await client.call_tool("run_query", _query(acme_sales, TRIVIAL)) for _ in range(TOOL_PER_MINUTE)
        ]
        with pytest.raises(MCPError) as refused:
            await client.call_tool("run_query", _query(acme_sales, TRIVIAL))
    assert gated == [INVALID] * 9
    assert [answer.is_error for answer in answers] == [False] * TOOL_PER_MINUTE
    assert refused.value.error.code == RATE_LIMITED
    assert refused.value.error.data["limit"] == f"{TOOL_PER_MINUTE} per 1 minute"


async def test_a_viewer_reads_their_own_preferences_and_still_cannot_change_them(server, committed, acme):
    def preference(username: str, notes: str) -> AgentPreference:
        user = acme.memberships.get(user__username=username).user
        AgentPreference.objects.filter(user=user, tenant=acme).delete()
        return AgentPreference.objects.create(user=user, tenant=acme, notes=notes)

    committed(preference, username="bob", notes="Bob's own note")
    committed(preference, username="alice", notes="Alice's note")
    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        read = await client.call_tool("get_data_preferences", {})
        with pytest.raises(MCPError) as refused:
            await client.call_tool("set_data_preferences", {"notes": "changed"})
    assert tools == set(ACME_VIEWER_TOOLS)
    assert read.structured_content == {"defaultTimePeriod": "", "notes": "Bob's own note"}
    assert refused.value.error.code == FORBIDDEN
    assert refused.value.error.data["missing"] == ["data_agent:write"]


# (An unpaired surrogate never reaches the tool: the SDK's argument validation refuses it first.)
@pytest.mark.parametrize("argument", ["notes", "defaultTimePeriod"])
async def test_preferences_that_postgresql_cannot_store_are_refused_saying_why(
    server, committed, acme_contributor, argument
):
    async with minted_sdk_client(committed, server, acme_contributor()) as (client, _):
        with pytest.raises(MCPError) as refused:
            await client.call_tool("set_data_preferences", {argument: "before\u0000after"})
        kept = await client.call_tool("get_data_preferences", {})
    assert refused.value.error.code == INVALID
    assert (
        refused.value.error.message
        == f"{argument} contains a NUL character (\\u0000), which cannot be stored."
    )
    assert kept.structured_content == {"defaultTimePeriod": "", "notes": ""}
