from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

from core import db as core_db
from tests.lanes import E2E_HALVES
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory
from tests.support.fast_flush import fast_flush_install
from tests.support.ratelimit_support import rate_limit_reset_for_tests
from tests.support.sample_databases import sample_databases_drop


def pytest_configure(config: pytest.Config) -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(f"The test suite runs on PostgreSQL; set DATABASE_URL (engine is {engine}).")
    fast_flush_install()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The sample databases this run made (tests/support/sample_databases.py) go with it; by now
    pytest-django has dropped the test database and every server has stopped."""
    database = settings.DATABASES["default"]
    test_database = (database.get("TEST") or {}).get("NAME") or f"test_{database['NAME']}"
    sample_databases_drop(test_database=test_database)


# Where a test lives says what it costs (docs/testing.md): everything under tests/e2e/ and
# tests/fresh_clone/ starts processes and is marked ``e2e``; the ``slow`` ones run for a minute or
# more each. Marked here, by path, so no file can forget its marker: ``pytest -m "not e2e"`` is
# the in-process tier of ``make check``, ``-m e2e`` the other lanes of ``make test``.
_E2E_DIRS = ("tests/e2e/", "tests/fresh_clone/")
_SLOW_PATHS = (
    "tests/fresh_clone/",
    "tests/e2e/conformance/",
    "tests/e2e/server/test_topology.py",
    "tests/e2e/audit/test_audit_faults.py",
    "tests/e2e/jobs/",
)


# ``make test`` runs the end-to-end tests in two lanes side by side (tests/lanes.py), split by
# folder so that each lane starts only the servers its folders use: the first half is these
# folders (about half of the end-to-end time, measured), the second half everything else, so a new
# folder is never left out.
E2E_FIRST_HALF = (
    "tests/fresh_clone/",
    "tests/e2e/browser/",
    "tests/e2e/upstreams/",
    "tests/e2e/audit/",
    "tests/e2e/jobs/",
    "tests/e2e/conformance/",
    "tests/e2e/research/",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e-half",
        choices=E2E_HALVES,
        default=None,
        help="keep only this half of the end-to-end tests (tests/conftest.py's E2E_FIRST_HALF, or the rest)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    half = config.getoption("--e2e-half")
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        path = item.path.relative_to(root).as_posix()
        if path.startswith(_E2E_DIRS):
            item.add_marker(pytest.mark.e2e)
            if half is not None and path.startswith(E2E_FIRST_HALF) != (half == "first"):
                dropped.append(item)
                continue
        if path.startswith(_SLOW_PATHS):
            item.add_marker(pytest.mark.slow)
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def operator(db, client):
    """A superuser, signed in to the admin through the ``client`` fixture."""
    user = UserFactory.create(username="operator", is_staff=True, is_superuser=True)
    client.force_login(user)
    return user


@pytest.fixture
def tenant(db):
    return TenantFactory(slug="acme-test", name="Acme Test")


@pytest.fixture
def owner(db, tenant):
    return MembershipFactory(user=UserFactory(username="owner"), tenant=tenant, role="admin")


@pytest.fixture
def member(db, tenant):
    return MembershipFactory(user=UserFactory(username="member"), tenant=tenant, role="viewer")


@pytest.fixture
def outsider(db):
    return MembershipFactory(
        user=UserFactory(username="outsider"), tenant=TenantFactory(slug="other-test"), role="admin"
    )


@pytest.fixture(autouse=True)
def _rate_limits_count_from_zero(settings) -> None:
    """No test spends another's budget: no cached rules or storages, and a namespace of its own
    in the rate-limit store (which may be a Redis that outlives the run)."""
    settings.GATEHOUSE = {
        **settings.GATEHOUSE,
        "RATE_LIMIT_KEY_PREFIX": f"gatehouse-test-{secrets.token_hex(6)}",
    }
    rate_limit_reset_for_tests()


# The queue of the literature searches and tool tasks that in-process tests start: the session's jobs worker
# (tests/e2e's ``jobs_worker``, alive once an end-to-end module asked for it) takes only "default",
# so it never runs their steps behind the test's back; tests/jobs/support.py's steps_run takes all.
IN_PROCESS_JOBS_QUEUE = "in-process-tests"


@pytest.fixture(autouse=True)
def _in_process_jobs_queue(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if {"e2e", "fresh_clone"} & set(request.node.path.parts):
        return
    from research.literature_job import literature_search

    monkeypatch.setattr(literature_search, "queue", IN_PROCESS_JOBS_QUEUE, raising=False)
    # And MCP tool tasks (jobs.tool_task_kind), whose queue is a setting: a new GATEHOUSE dict,
    # through pytest-django's fixture, so that core.conf hears of it.
    overridden = request.getfixturevalue("settings")
    overridden.GATEHOUSE = {**overridden.GATEHOUSE, "JOBS_TOOL_TASK_QUEUE": IN_PROCESS_JOBS_QUEUE}


@pytest.fixture
async def fresh_hot_path_pool() -> AsyncIterator[None]:
    """For tests that reach the hot-path pool or the audit writer's wire connection (the catalogue's
    version check, the audit trail): they belong to this test's event loop, and the test database
    must be droppable afterwards, so they are closed here."""
    yield
    pool, core_db._pool._pool = core_db._pool._pool, None
    if pool is not None:
        await pool.close()
    core_db.wire_connection.close()
    await sync_to_async(connections.close_all)()
