from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection, connections
from django.db.models import Max
from django.test import override_settings
from oauth2_provider.models import Application

from accounts.models import Membership, Role, Tenant, User
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
from upstreams.models import Upstream

SERVER_DB_APPLICATION = "gatehouse-e2e-server"


def _database_url() -> str:
    db = connection.settings_dict
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    # The name lets a test find the server's own connections in pg_stat_activity.
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}?application_name={SERVER_DB_APPLICATION}"


# Rows the migrations make and no test writes; a running server may hold them in its caches.
_KEPT_TABLES = {ContentType._meta.db_table, Permission._meta.db_table}


def _committed_rows_truncate() -> None:
    """Empty every table but the kept ones. Sequences go on counting, so no row made later reuses
    the primary key of one a server process may still remember."""
    tables = sorted(
        set(connection.introspection.django_table_names(only_existing=True, include_views=False))
        - _KEPT_TABLES
    )
    with connection.cursor() as cursor:
        # A server connection left inside a transaction would make TRUNCATE wait for ever; fail instead.
        cursor.execute("SET lock_timeout = '30s'")
        cursor.execute(f"TRUNCATE {', '.join(connection.ops.quote_name(table) for table in tables)}")


@pytest.fixture(scope="module", autouse=True)
def demo(django_db_setup, django_db_blocker) -> Iterator[None]:
    """The demo tenants and people, committed so the Daphne processes see them: made afresh for each
    end-to-end module and truncated after it, with every other row its tests and the servers
    committed. So no module, end-to-end or in-process, sees another's rows, in whatever order."""
    try:
        with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as mp:
            mp.setenv("DEMO_PASSWORD", DEMO_PASSWORD)
            _in_own_thread(lambda: call_command("bootstrap_demo", verbosity=0))
        yield
    finally:
        # Also after a demo that failed half-way: nothing of it may reach the next module.
        with django_db_blocker.unblock():
            _in_own_thread(_committed_rows_truncate)


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


@pytest.fixture(scope="session")
def script_path(tmp_path_factory) -> Path:
    """The LLM script ``gateway_server`` answers from; a test writes the answers it needs first."""
    path = tmp_path_factory.mktemp("llm-gateway") / "script.json"
    path.write_text(json.dumps({"responses": {"gateway": "Gatehouse is an MCP gateway."}}))
    return path


@pytest.fixture(scope="session")
def gateway_server(database_url, tmp_path_factory, script_path) -> Iterator[DaphneServer]:
    """A server whose language model calls are answered by litellm's ``mock_response`` from
    ``script_path``, with rate-limit rules, toolset switches and refusals seen at once."""
    yield from _serve(
        tmp_path_factory,
        database_url,
        "llm-gateway",
        LLM_MOCK_RESPONSES_FILE=str(script_path),
        RATE_LIMIT_RULE_CACHE_SECONDS="0",
        MCP_TOOLSET_CACHE_SECONDS="0",
        AUDIT_REFUSAL_WINDOW_SECONDS="0",
    )


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
    """For a test that resolves the server's tokens in this process (``mcp_gateway.tokens``): the
    server's resource URLs, and the hot-path pool closed afterwards, as it belongs to this test's
    event loop and holds connections to the test database."""
    from core.db import _pool

    with override_settings(MCP_RESOURCE_URL=server.resource_url, API_RESOURCE_URL=f"{server.public_url}/api"):
        yield
    if _pool._pool is not None:
        await _pool._pool.close()
        _pool._pool = None
