"""Two worker processes counting one limit in one Redis, through their leases, let no more than the
limit through between them, lose at most what the documented bound says, and count every call they
let through (core.ratelimit.leases)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings
from limits import parse

from tests.support.python_process import committed_database_url
from tests.support.ratelimit_support import TEST_REDIS_URL

REDIS_URL = TEST_REDIS_URL
LIMIT = 2000
LEASE_SIZE = 16
WORKERS = 2
TRIES_PER_WORKER = 2000
CONCURRENCY = 8

# One worker: waits for the go file, then makes its calls from CONCURRENCY coroutines at once.
WORKER = f"""
import asyncio, sys
from pathlib import Path

import django

django.setup()
from core.errors import RateLimited
from core.identity import Identity
from core.models import RateLimitScope
from core.ratelimit.limits import rate_limit_call

ALICE = Identity(
    user_id=1, username="alice", tenant_id=1, tenant_slug="acme", tenant_name="Acme", role="admin",
    scopes=frozenset({{"mcp:read"}}), application_id=0, client_id="client", client_name="Client", token_id=0,
)


async def main() -> None:
    let_through = 0

    async def caller() -> None:
        nonlocal let_through
        for _ in range({TRIES_PER_WORKER // CONCURRENCY}):
            try:
                await rate_limit_call(identity=ALICE, scope=RateLimitScope.TOOL, target="whoami")
            except RateLimited:
                continue
            let_through += 1

    # Rules read and Redis connected before the start, so both workers count from the first moment.
    await rate_limit_call(identity=ALICE, scope=RateLimitScope.TOOL, target="warm-up")
    print("ready", flush=True)
    go = Path(sys.argv[1])
    while not go.exists():
        await asyncio.sleep(0.001)
    await asyncio.gather(*(caller() for _ in range({CONCURRENCY})))
    print(let_through, flush=True)


asyncio.run(main())
"""


def counted_in_redis(prefix: str) -> int:
    item = parse(f"{LIMIT}/minute")
    store = redis.Redis.from_url(REDIS_URL)
    try:
        times = store.lrange(f"{prefix}:{item.key_for('tool', 1, 1, 'whoami')}", 0, -1)
        store.delete(f"{prefix}:{item.key_for('tool', 1, 1, 'whoami')}")
    finally:
        store.close()
    since = time.time() - item.get_expiry()
    return sum(float(stamp) >= since for stamp in times)


@pytest.mark.django_db(transaction=True)
def test_two_workers_share_one_limit_within_the_documented_bound(tmp_path: Path):
    prefix = f"gatehouse-test-workers-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": committed_database_url(),
        "REDIS_URL": REDIS_URL,
        "RATE_LIMIT_KEY_PREFIX": prefix,
        "RATE_LIMIT_TOOL": f"{LIMIT}/minute",
        "RATE_LIMIT_LEASE_SIZE": str(LEASE_SIZE),
        "LOG_LEVEL": "WARNING",
    }
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(go)],
            env=env,
            cwd=settings.BASE_DIR,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        go.touch()  # both start at once, so their leases race
        outputs = [worker.communicate(timeout=120)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    assert [worker.returncode for worker in workers] == [0] * WORKERS
    let_through = sum(int(output.split()[-1]) for output in outputs)
    # Never more than the limit between them (the whole run is well inside one period)...
    assert let_through <= LIMIT
    # ...and at most the slots the workers leased ahead and had not spent when the last was refused.
    assert let_through >= LIMIT - WORKERS * LEASE_SIZE
    # Every call let through is counted in Redis; unspent slots went back at exit (what could not
    # go back would stay counted: never fewer counted than let through).
    assert let_through <= counted_in_redis(prefix) <= LIMIT
