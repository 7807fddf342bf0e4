from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection, connections
from django.db.models import Max
from oauth2_provider.models import Application

from accounts.models import Membership, Tenant, User
from data_agent.models import AgentPreference
from language_models.models import LanguageModel
from mcp_gateway.models import TenantToolset
from oauth.models import AccessToken
from tests.e2e.harness import DEMO_PASSWORD, Browser, DaphneServer
from tests.e2e.oauth_driver import OAuthDriver

SERVER_DB_APPLICATION = "gatehouse-e2e-server"


def _database_url() -> str:
    db = connection.settings_dict
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    # The name lets a test find the server's own connections in pg_stat_activity.
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}?application_name={SERVER_DB_APPLICATION}"


@pytest.fixture(scope="session")
def demo(django_db_setup, django_db_blocker) -> None:
    """The demo tenants and people, committed so the Daphne process sees them."""
    with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEMO_PASSWORD", DEMO_PASSWORD)
        call_command("bootstrap_demo", verbosity=0)


@pytest.fixture(scope="session")
def database_url(django_db_setup, django_db_blocker) -> str:
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
def server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(
        tmp_path_factory,
        database_url,
        "main",
        MCP_TOOLSET_CACHE_SECONDS=str(MAIN_SERVER_TOOLSET_CACHE_SECONDS),
    )


@pytest.fixture(scope="session")
def second_server(server, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """Another process behind the same public URL, sharing the database: a second replica."""
    yield from _serve(tmp_path_factory, database_url, "second", public_url=server.public_url)


@pytest.fixture
def doomed_server(server, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """A replica a test may kill."""
    yield from _serve(tmp_path_factory, database_url, "doomed", public_url=server.public_url)


@pytest.fixture(scope="session")
def faults_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
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
def short_token_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
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


_CLEANED_MODELS = [LanguageModel, AgentPreference, AccessToken, Application, Membership, User, Tenant]


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
def tenant_toolset(django_db_blocker):
    """Turn a toolset on or off for a tenant, as the admin inline would; undone after the test.
    Written directly: this test process need not serve the toolset itself."""
    touched: list[tuple[str, str]] = []

    def switch(tenant_slug: str, toolset: str, *, enabled: bool) -> None:
        def write() -> None:
            tenant = Tenant.objects.get(slug=tenant_slug)
            TenantToolset.objects.update_or_create(
                tenant=tenant, toolset=toolset, defaults={"enabled": enabled}
            )

        with django_db_blocker.unblock():
            _in_own_thread(write)
        touched.append((tenant_slug, toolset))

    yield switch

    def undo() -> None:
        for tenant_slug, toolset in touched:
            TenantToolset.objects.filter(tenant__slug=tenant_slug, toolset=toolset).delete()

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
