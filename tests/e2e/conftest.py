from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Max
from django.test import override_settings
from oauth2_provider.models import Application

from accounts.models import IdentityProvider, Invitation, Membership, Role, Tenant, User
from data_agent.models import AgentPreference
from language_models.models import LanguageModel
from mcp_gateway.models import TenantToolset
from oauth.models import AccessToken
from research.models import LibraryPaper
from tests.e2e.harness import DEMO_PASSWORD, Browser, DaphneServer, Person
from tests.e2e.llm_gateway_support import ACME_OPENAI_KEY
from tests.e2e.oauth_driver import OAuthDriver
from tests.e2e.upstream_fixtures import (  # noqa: F401 (fixtures of the upstream tests)
    http_upstream,
    sse_upstream,
    upstream,
    upstream_dir,
    upstream_fields,
)
from tests.jobs.worker_process import JobsWorkerProcess
from tests.support.factories import DEFAULT_PASSWORD, LanguageModelFactory, MembershipFactory
from tests.support.python_process import committed_database_url
from upstreams.models import Upstream

SERVER_DB_APPLICATION = "gatehouse-e2e-server"

logger = logging.getLogger(__name__)


def _database_url() -> str:
    # The name lets a test find the server's own connections in pg_stat_activity.
    return f"{committed_database_url()}?application_name={SERVER_DB_APPLICATION}"


# Rows the migrations make and no test writes; a running server may hold them in its caches.
_KEPT_TABLES = {ContentType._meta.db_table, Permission._meta.db_table}


@dataclass(frozen=True)
class _Snapshot:
    """Committed rows to put back: each non-empty table's in COPY's binary form, and where each
    sequence had got to when they were read."""

    rows: dict[str, bytes] = field(default_factory=dict)
    sequences: dict[str, int] = field(default_factory=dict)


_NOTHING = _Snapshot()

# Those of the tables given with triggers of our own (a foreign key's are internal).
_TRIGGERED_TABLES = """
    SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE NOT t.tgisinternal AND c.relname = ANY(%s) AND pg_table_is_visible(c.oid)
"""
_SEQUENCE_POSITIONS = """
    SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences
    WHERE last_value IS NOT NULL
"""
_SEQUENCES_FORWARD = """
    SELECT setval(name::regclass, position) FROM unnest(%s::text[], %s::bigint[]) AS s(name, position)
    WHERE position > coalesce(pg_sequence_last_value(name::regclass), 0)
"""


def _tables_not_kept() -> list[str]:
    return sorted(
        set(connection.introspection.django_table_names(only_existing=True, include_views=False))
        - _KEPT_TABLES
    )


def _snapshot_take() -> _Snapshot:
    """Every table's committed rows but the kept ones', read at one instant."""
    rows: dict[str, bytes] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for table in _tables_not_kept():
            with cursor.copy(f"COPY {connection.ops.quote_name(table)} TO STDOUT (FORMAT BINARY)") as copy:
                data = b"".join(copy)
            if cursor.rowcount:
                rows[table] = data
        cursor.execute(_SEQUENCE_POSITIONS)
        sequences = dict(cursor.fetchall())
    return _Snapshot(rows=rows, sequences=sequences)


def _committed_rows_replace(snapshot: _Snapshot) -> None:
    """Make every table but the kept ones hold exactly ``snapshot``'s rows, in one transaction.

    The rows keep their keys. Sequences go on counting (neither DELETE nor the in-process tests'
    flush sets one back, and one set back is moved past where it was when the snapshot was read),
    so no row made later reuses the primary key of one a server process may still remember."""
    tables = _tables_not_kept()
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        # A server connection left inside a transaction would make the lock wait for ever; fail instead.
        cursor.execute("SET LOCAL lock_timeout = '30s'")
        # As TRUNCATE would, wait for the writes under way and hold off new ones until the commit,
        # so no row a server is writing now survives. DELETE then costs next to nothing on tables
        # this small, where TRUNCATE makes new files for every table and index (a second in all).
        cursor.execute(f"LOCK TABLE {', '.join(map(quote, tables))} IN EXCLUSIVE MODE")
        cursor.execute(_TRIGGERED_TABLES, [tables])
        triggered = [quote(table) for (table,) in cursor.fetchall()]
        # The change log's rows are put back as the demo left them, and nothing more: a toolset
        # row's trigger would log a change nobody made, and the log's trigger NOTIFY the servers,
        # waking their streams.
        _statements(cursor, [f"ALTER TABLE {table} DISABLE TRIGGER USER" for table in triggered])
        _statements(cursor, [f"DELETE FROM {quote(table)}" for table in tables])  # noqa: S608 (quoted names)
        for table, rows in snapshot.rows.items():
            with cursor.copy(f"COPY {quote(table)} FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(rows)
        if snapshot.sequences:
            cursor.execute(_SEQUENCES_FORWARD, [list(snapshot.sequences), list(snapshot.sequences.values())])
        # The foreign keys are DEFERRABLE INITIALLY DEFERRED, so the order above did not matter; they
        # are checked here, as a table's triggers cannot be switched back on with checks pending.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        _statements(cursor, [f"ALTER TABLE {table} ENABLE TRIGGER USER" for table in triggered])


def _statements(cursor: CursorWrapper, statements: list[str]) -> None:
    # One round trip: without parameters, psycopg sends them as one simple query.
    if statements:
        cursor.execute("; ".join(statements))


@pytest.fixture(scope="session")
def demo_snapshot(django_db_setup, django_db_blocker) -> _Snapshot:
    """The demo tenants and people (``bootstrap_demo``), made once per run on empty tables and
    read back as every table's rows. A demo that fails half-way leaves nothing behind, and every
    module that asks afterwards fails with its error (pytest keeps a fixture's failure)."""
    with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEMO_PASSWORD", DEMO_PASSWORD)
        try:
            _in_own_thread(lambda: _committed_rows_replace(_NOTHING))
            started = time.monotonic()
            _in_own_thread(lambda: call_command("bootstrap_demo", verbosity=0))
            built = time.monotonic() - started
            snapshot = _in_own_thread(_snapshot_take)
        except BaseException:
            _in_own_thread(lambda: _committed_rows_replace(_NOTHING))
            raise
    logger.info("bootstrap_demo took %.2f s; %d tables have rows", built, len(snapshot.rows))
    return snapshot


@pytest.fixture(scope="module", autouse=True)
def demo(demo_snapshot, django_db_blocker) -> Iterator[None]:
    """The demo, committed so the Daphne processes see it: the same rows with the same keys for
    each end-to-end module, put back in place of every row the modules before it and the servers
    committed, and removed after it with every row its tests and the servers committed. So no
    module, end-to-end or in-process, sees another's rows, in whatever order, and a module that
    changes alice or a toolset leaves the next one the demo as it was.

    A server that remembers a demo row by its key forgets what a module changed in it: its toolset
    and upstream caches are off (harness.py), and what else it keeps is keyed by token (gone with
    the module) or checked against the row's version on each use.

    Only the rows are put back. What the demo made outside them (the sample database
    ``<database>_sample_acme`` and its reader role) was made once, and no test writes to it."""
    try:
        with django_db_blocker.unblock():
            started = time.monotonic()
            _in_own_thread(lambda: _committed_rows_replace(demo_snapshot))
            logger.info("The demo was put back in %.3f s", time.monotonic() - started)
        yield
    finally:
        # Also after a restore that failed: nothing may reach the next module.
        with django_db_blocker.unblock():
            _in_own_thread(lambda: _committed_rows_replace(_NOTHING))


@pytest.fixture(scope="session")
def collected_static() -> None:
    """The admin's stylesheets and scripts where WhiteNoise serves them from, as ``make run`` and
    the container image collect them. WhiteNoise lists them once, when a server starts, so this
    runs before any does; without it every admin page (and its screenshot) would be unstyled."""
    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.fixture(scope="session")
def database_url(django_db_setup, django_db_blocker, collected_static) -> str:
    # Every server fixture starts from this one, so each finds the static files collected.
    with django_db_blocker.unblock():
        return _database_url()


def _serve(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    name: str,
    public_url: str | None = None,
    **env: str,
) -> Iterator[DaphneServer]:
    log_path = Path(tmp_path_factory.mktemp("daphne")) / f"{name}.log"
    server = DaphneServer(database_url=database_url, log_path=log_path, public_url=public_url, extra_env=env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# Uncached, so that one test's toolset switch never leaks into the next test's listing.
MAIN_SERVER_TOOLSET_CACHE_SECONDS = 0


@pytest.fixture(scope="session")
def server(database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(
        tmp_path_factory,
        database_url,
        "main",
        MCP_TOOLSET_CACHE_SECONDS=str(MAIN_SERVER_TOOLSET_CACHE_SECONDS),
        # Literature searches (and the jobs_worker beside it, which copies this) stay offline: the
        # tenant's own library is the one source.
        RESEARCH_SOURCES="library",
    )


@pytest.fixture(scope="session")
def jobs_worker(server, tmp_path_factory) -> Iterator[JobsWorkerProcess]:
    """A ``manage.py jobs_worker`` beside the main server: the steps of the jobs its tools start."""
    worker = JobsWorkerProcess(
        env=server.env,
        log_path=tmp_path_factory.mktemp("jobs-worker") / "worker.log",
        worker_id="e2e-main-worker",
    )
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture(scope="session")
def second_server(server, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """Another process behind the same public URL, sharing the database: a second replica."""
    yield from _serve(tmp_path_factory, database_url, "second", public_url=server.public_url)


# What the gateway servers' model answers until a test scripts its own answers.
GATEWAY_SCRIPT_DEFAULT = {"responses": {"gateway": "Gatehouse is an MCP gateway."}}
# The gateway servers' tool tasks go to this queue, which only gateway_jobs_worker takes: the main
# worker has no script, so a step it took would call a real model.
GATEWAY_TASK_QUEUE = "e2e-scripted-model"
GATEWAY_WORKER_ID = "e2e-gateway-worker"


@pytest.fixture(scope="session")
def script_path(tmp_path_factory) -> Path:
    """The LLM script the gateway servers and their worker answer from. Before each test on them
    ``_gateway_script_reset`` puts the default back; the test writes the answers it needs over it."""
    path = tmp_path_factory.mktemp("llm-gateway") / "script.json"
    path.write_text(json.dumps(GATEWAY_SCRIPT_DEFAULT))
    return path


@pytest.fixture(autouse=True)
def _gateway_script_reset(request: pytest.FixtureRequest) -> None:
    """The script holds the default whatever the test before (of any module, in any order) left in
    it, or consumed of it."""
    if "gateway_server" in request.fixturenames:
        request.getfixturevalue("script_path").write_text(json.dumps(GATEWAY_SCRIPT_DEFAULT))


def _gateway_env(script_path: Path) -> dict[str, str]:
    return {
        "LLM_MOCK_RESPONSES_FILE": str(script_path),
        "JOBS_TOOL_TASK_QUEUE": GATEWAY_TASK_QUEUE,
        "RATE_LIMIT_RULE_CACHE_SECONDS": "0",
        "MCP_TOOLSET_CACHE_SECONDS": "0",
        "AUDIT_REFUSAL_WINDOW_SECONDS": "0",
    }


@pytest.fixture(scope="session")
def gateway_server(database_url, tmp_path_factory, script_path) -> Iterator[DaphneServer]:
    """A server whose language model calls are answered by litellm's ``mock_response`` from
    ``script_path``, with rate-limit rules, toolset switches and refusals seen at once."""
    yield from _serve(tmp_path_factory, database_url, "llm-gateway", **_gateway_env(script_path))


@pytest.fixture(scope="session")
def second_gateway_server(
    gateway_server, database_url, tmp_path_factory, script_path
) -> Iterator[DaphneServer]:
    """A second replica of ``gateway_server``, behind the same public URL and answering from the
    same script."""
    yield from _serve(
        tmp_path_factory,
        database_url,
        "llm-gateway-second",
        public_url=gateway_server.public_url,
        **_gateway_env(script_path),
    )


@pytest.fixture(scope="session")
def gateway_jobs_worker(gateway_server, tmp_path_factory) -> Iterator[JobsWorkerProcess]:
    """A ``manage.py jobs_worker`` for the gateway servers' tool tasks, its model answering from
    the same script."""
    worker = JobsWorkerProcess(
        env=gateway_server.env,
        log_path=tmp_path_factory.mktemp("gateway-worker") / "worker.log",
        worker_id=GATEWAY_WORKER_ID,
        queue=GATEWAY_TASK_QUEUE,
    )
    worker.start()
    yield worker
    worker.stop()


@pytest.fixture
def acme_openai(committed):
    """acme's OpenAI model with a stored key."""
    return committed(
        LanguageModelFactory,
        tenant=Tenant.objects.get(slug="acme"),
        name="acme-openai",
        model="openai/gpt-4o-mini",
        api_key=ACME_OPENAI_KEY,
        is_default=True,
    )


@pytest.fixture
def doomed_server(server, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """A replica a test may kill."""
    yield from _serve(tmp_path_factory, database_url, "doomed", public_url=server.public_url)


@pytest.fixture(scope="session")
def faults_server(database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """Serves the test-only `faults` toolset beside the product's own."""
    yield from _serve(
        tmp_path_factory,
        database_url,
        "faults",
        GATEHOUSE_TOOLSETS="mcp_gateway.toolsets.account,tests.toolsets.faults",
        MCP_TOOLSET_CACHE_SECONDS="0",
    )


@pytest.fixture(scope="session")
def second_faults_server(faults_server, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """A second replica of the faults server, behind the same public URL."""
    yield from _serve(
        tmp_path_factory,
        database_url,
        "faults-second",
        public_url=faults_server.public_url,
        GATEHOUSE_TOOLSETS="mcp_gateway.toolsets.account,tests.toolsets.faults",
    )


@pytest.fixture(scope="session")
def short_token_server(database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """Access tokens live two seconds here, so a test can watch a client refresh."""
    yield from _serve(tmp_path_factory, database_url, "short-tokens", OAUTH_ACCESS_TOKEN_SECONDS="2")


def _in_own_thread(work):
    """Run ORM work on a thread of its own: its own connection, in autocommit, outside any test
    transaction, so the server process sees the rows at once."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = work()
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


# Jobs (UUID keys, no order to mark) go with their person and tenant; the demo's with the module.
_CLEANED_MODELS = [
    IdentityProvider,
    Invitation,
    LibraryPaper,
    Upstream,
    LanguageModel,
    AgentPreference,
    AccessToken,
    Application,
    Membership,
    User,
    Tenant,
]


@pytest.fixture
def committed(django_db_blocker):
    """Create rows the Daphne process can see, then delete every row of these models that appeared
    during the test (including the ones factories made on the side and the server registered)."""

    def high_water_marks() -> dict:
        return {model: model.objects.aggregate(top=Max("pk"))["top"] or 0 for model in _CLEANED_MODELS}

    with django_db_blocker.unblock():
        marks = _in_own_thread(high_water_marks)

    def make(factory, **kwargs):
        with django_db_blocker.unblock():
            return _in_own_thread(lambda: factory(**kwargs))

    yield make

    def clean() -> None:
        for model, top in marks.items():
            model.objects.filter(pk__gt=top).delete()

    with django_db_blocker.unblock():
        _in_own_thread(clean)


@pytest.fixture
def own_admin(committed) -> Membership:
    """An admin of a tenant of the test's own (password ``DEFAULT_PASSWORD``), for a test that changes
    a person or a membership: the demo's alice, bob and carol stay as every other test expects."""
    return committed(MembershipFactory, role=Role.ADMIN)


def person_of(membership: Membership) -> Person:
    """The person who signs in as ``membership``'s factory-made user."""
    return Person(membership.user.username, password=DEFAULT_PASSWORD, tenant=membership.tenant.slug)


@pytest.fixture
def tenant_toolset(django_db_blocker):
    """Turn a toolset on or off for a tenant, as the admin inline would; put back as it was after
    the test (the demo's own settings included). Written directly: this test process need not serve
    the toolset itself."""
    before: dict[tuple[str, str], bool | None] = {}

    def switch(tenant_slug: str, toolset: str, *, enabled: bool) -> None:
        def write() -> bool | None:
            tenant = Tenant.objects.get(slug=tenant_slug)
            row = TenantToolset.objects.filter(tenant=tenant, toolset=toolset).first()
            TenantToolset.objects.update_or_create(
                tenant=tenant, toolset=toolset, defaults={"enabled": enabled}
            )
            return row.enabled if row is not None else None

        with django_db_blocker.unblock():
            was = _in_own_thread(write)
        before.setdefault((tenant_slug, toolset), was)

    yield switch

    def undo() -> None:
        for (tenant_slug, toolset), was in before.items():
            rows = TenantToolset.objects.filter(tenant__slug=tenant_slug, toolset=toolset)
            if was is None:
                rows.delete()
            else:
                rows.update(enabled=was)

    with django_db_blocker.unblock():
        _in_own_thread(undo)


@pytest.fixture
async def driver(server):
    """A scripted OAuth client against the main server."""
    driver = OAuthDriver(server)
    yield driver
    await driver.aclose()


@pytest.fixture
async def browser(server):
    """A person's browser against the main server."""
    browser = Browser(server.base_url)
    yield browser
    await browser.aclose()


@pytest.fixture(autouse=True)
async def _close_async_orm_connections():
    """The async ORM runs on asgiref's worker thread, outside pytest-django's care; close its
    connection after each test so the test database can be dropped at the end of the run."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
async def resolve_here(server):
    """For a test that resolves the server's tokens in this process (``mcp_gateway.transport.bearer``): the
    server's resource URLs, and the hot-path pool closed afterwards, as it belongs to this test's
    event loop and holds connections to the test database."""
    from core.db import _pool

    with override_settings(MCP_RESOURCE_URL=server.resource_url, API_RESOURCE_URL=f"{server.public_url}/api"):
        yield
    if _pool._pool is not None:
        await _pool._pool.close()
        _pool._pool = None
