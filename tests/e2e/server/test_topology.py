"""Several workers behind nginx on this machine (``make topology``, docs/topology.md): the official
SDK client's whole scenario through nginx, one worker SIGKILLed mid-run, a rate limit shared
through Redis, /metrics summed across the workers and an audit row for every answered call."""

from __future__ import annotations

import os
import time

import pytest

from tests.e2e.conftest import _in_own_thread
from tests.e2e.topology import DEFAULT_NGINX, DEFAULT_REDIS_URL, topology_running
from tests.e2e.topology_figures import figures_save
from tests.e2e.topology_scenario import scenario_run, topology_rows_prepare

pytestmark = pytest.mark.django_db


async def test_three_workers_behind_nginx_serve_one_session_through_a_kill(
    database_url, django_db_blocker, tmp_path
):
    started = time.monotonic()
    with django_db_blocker.unblock():
        _in_own_thread(topology_rows_prepare)
        with topology_running(
            directory=tmp_path / "topology",
            database_url=database_url,
            redis_url=os.environ.get("TOPOLOGY_REDIS_URL", DEFAULT_REDIS_URL),
            nginx_binary=os.environ.get("NGINX_PATH", DEFAULT_NGINX),
        ) as topology:
            figures = await scenario_run(topology, started=started)
    report = figures.report()
    print(f"\n{report}")  # shown with -s, and in the CI log when the test fails
    figures_save(figures)
    assert not figures.problems, report
