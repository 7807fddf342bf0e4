"""How fast the console's overview answers its charts on a tenant with a million audit rows, with
every day aggregated live and then with the finished days read from the daily rollup.

    .venv/bin/python benchmarks/console_overview.py [--requests 50]

Prepares its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_console_overview: migrated, then
`bootstrap_demo`) and counts rate limits in Redis database 14 (BENCH_REDIS_URL), which no test lane
or other benchmark uses. Into the real audit table it writes, with ``INSERT ... SELECT FROM
generate_series`` (as benchmarks/large_db.py does), 1,000,000 ``tool.called`` rows of acme spread
over the last 30 days (about 4% errors and 2% refusals, durations log-normal around 40 ms, 300
tools, a few of them much busier than the rest), 50,000 rows of acme's other actions and 250,000
``tool.called`` rows of globex, each statement's rows in the order of their ``created`` as the
gateway writes them. The rows are marked (``request_id`` ``bench-console``); a run keeps
them when they are all there and seeds them anew otherwise, and VACUUM ANALYZE refreshes the
planner's statistics.

alice signs in through the login view for a session cookie; Gatehouse runs under Daphne as shipped
(no jobs worker, so nothing rolls up behind the script's back). The rollup's tables are emptied,
and after a warm-up she fetches ``GET /console/acme/overview.json`` --requests times, one after
another, each timed: every day live. Then the script rolls the finished days up
(``tool_call_days_roll_up``, timed, and a second run that finds nothing to do, timed: the cost of
each periodic run) and she fetches it --requests times again. Prints p50, p95 and mean in ms of both,
side by side, checks that both answers are the same, then each of the overview's queries timed in
this process with the rollup filled, and ``EXPLAIN (ANALYZE, BUFFERS)`` of the slowest. A
measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import httpx
import psycopg
from bench_support import bench_env, daphne_serving, free_port, prepare_database
from run_query_overhead import WARMUP, Samples, django_setup

SEED = "bench-console"
ACME_TOOL_CALLS = 1_000_000
ACME_OTHER_EVENTS = 50_000
GLOBEX_TOOL_CALLS = 250_000
TOOLS = 300
TARGET_P50_MS = 200

# One statement per tenant and action. The tool's number is skewed (the square of a uniform
# number), so a few tools take most of the calls, as on a gateway; the duration is log-normal
# (Box-Muller), median 40 ms with a long tail. Rows go in in the order of their ``created``, as the
# gateway appends them: a day's rows sit together in the table, as today's do in production.
_AUDIT_SQL = """
WITH people AS (
    SELECT row_number() OVER (ORDER BY m.id) - 1 AS n, m.user_id, u.username
    FROM accounts_membership m JOIN accounts_user u ON u.id = m.user_id
    WHERE m.tenant_id = %(tenant)s
), app AS (SELECT min(id) AS id, min(client_id) AS client_id FROM oauth2_provider_application)
INSERT INTO mcp_gateway_auditevent (created, action, outcome, tenant_id, user_id, username,
    application_id, client_id, session_id, request_id, ip, target, duration_ms, detail, event_id)
SELECT now() - random() * interval '30 days', %(action)s,
    CASE WHEN g %% 25 = 0 THEN 'error' WHEN g %% 49 = 0 THEN 'denied' ELSE 'ok' END,
    %(tenant)s, p.user_id, p.username, app.id, coalesce(app.client_id, ''), 'seed-' || md5((g %% 5000)::text),
    %(seed)s, '127.0.0.1'::inet,
    'tool_' || lpad(floor(%(tools)s * power(random(), 2))::int::text, 3, '0'),
    round((40 * exp(0.8 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())))::numeric, 1),
    '{"method": "tools/call", "arguments": {}}'::jsonb, gen_random_uuid()
FROM generate_series(1, %(rows)s) AS g
CROSS JOIN app
JOIN people p ON p.n = g %% (SELECT count(*) FROM people)
ORDER BY 1
"""


def audit_seed(database_url: str) -> int:
    """Seed the marked rows unless they are all there; the number of rows in the table."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        tenants: dict[str, int] = dict(conn.execute("SELECT slug, id FROM accounts_tenant").fetchall())
        wanted = ACME_TOOL_CALLS + ACME_OTHER_EVENTS + GLOBEX_TOOL_CALLS
        found = _count(conn, "SELECT count(*) FROM mcp_gateway_auditevent WHERE request_id = %s", SEED)
        if found != wanted:
            started = time.monotonic()
            conn.execute("DELETE FROM mcp_gateway_auditevent WHERE request_id = %s", [SEED])
            for slug, action, rows in (
                ("acme", "tool.called", ACME_TOOL_CALLS),
                ("acme", "session.created", ACME_OTHER_EVENTS),
                ("globex", "tool.called", GLOBEX_TOOL_CALLS),
            ):
                conn.execute(
                    _AUDIT_SQL,
                    {"tenant": tenants[slug], "action": action, "rows": rows, "seed": SEED, "tools": TOOLS},
                )
            conn.execute("VACUUM ANALYZE mcp_gateway_auditevent")
            print(f"Seeded {wanted:,} audit rows in {time.monotonic() - started:.0f} s", file=sys.stderr)
        return _count(conn, "SELECT count(*) FROM mcp_gateway_auditevent", None)


def _count(conn: psycopg.Connection, query: str, param: str | None) -> int:
    row = conn.execute(query, [] if param is None else [param]).fetchone()
    return int(row[0]) if row else 0


def signed_in(http: httpx.Client, *, password: str) -> None:
    """alice's session cookie, through the login view as a browser gets it."""
    form = http.get("/accounts/login/")
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    if match is None:
        raise RuntimeError("no CSRF token in the login form")
    answer = http.post(
        "/accounts/login/",
        data={"csrfmiddlewaretoken": match.group(1), "username": "alice", "password": password},
        headers={"referer": str(http.base_url) + "/accounts/login/"},
    )
    if answer.status_code != 302:
        raise RuntimeError(f"alice's sign-in answered HTTP {answer.status_code}")


def overview_timed(http: httpx.Client, *, requests: int) -> tuple[Samples, bytes]:
    """The timings of ``requests`` GETs after the warm-up, and the last answer."""
    samples = Samples()
    body = b""
    for number in range(WARMUP + requests):
        began = time.perf_counter()
        answer = http.get("/console/acme/overview.json")
        elapsed = time.perf_counter() - began
        if answer.status_code != 200:
            raise RuntimeError(f"overview.json answered HTTP {answer.status_code}")
        if number >= WARMUP:
            samples.seconds.append(elapsed)
            body = answer.content
    return samples, body


def rollup_emptied(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("TRUNCATE core_rolledupday, core_toolcallday, core_toolcalldaytotal")


def rollup_filled() -> tuple[float, float, int]:
    """Seconds of the first roll-up and of a second one with nothing to do, and the days rolled."""
    from django.utils import timezone

    from core.audit.rollup.services import tool_call_days_roll_up

    began = time.perf_counter()
    days = tool_call_days_roll_up(now=timezone.now())
    first = time.perf_counter() - began
    began = time.perf_counter()
    tool_call_days_roll_up(now=timezone.now())
    return first, time.perf_counter() - began, len(days)


def queries_explained(database_url: str) -> None:
    """Each of the overview's queries as run in this process, then the plan of the slowest."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from accounts.models import Tenant
    from portal.console.overview_selectors import overview_read

    tenant_id = Tenant.objects.get(slug="acme").pk
    overview_read(tenant_id=tenant_id, now=timezone.now())  # warm the cache as the server's is
    with CaptureQueriesContext(connection) as captured:
        overview_read(tenant_id=tenant_id, now=timezone.now())
    print(f"\nThe overview's {len(captured.captured_queries)} queries, in this process (ms):")
    for query in captured.captured_queries:
        print(f"  {float(query['time']) * 1000:8.1f}  {query['sql'][:150]}")
    slowest = max(captured.captured_queries, key=lambda query: float(query["time"]))
    with psycopg.connect(database_url) as conn:
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + slowest["sql"]).fetchall()
    print("\nEXPLAIN (ANALYZE, BUFFERS) of the slowest:\n" + slowest["sql"] + "\n")
    print("\n".join(line for (line,) in plan))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=50, help="timed GETs of overview.json")
    args = parser.parse_args()

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    env = bench_env(
        public=public,
        name="console_overview",
        REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
    )
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    print("Seeding the audit rows (if missing)...", file=sys.stderr)
    rows = audit_seed(env["DATABASE_URL"])
    django_setup(env)
    rollup_emptied(env["DATABASE_URL"])
    with daphne_serving(port=port, env=env), httpx.Client(base_url=public, timeout=60) as http:
        signed_in(http, password=env["DEMO_PASSWORD"])
        print(f"Measuring, every day live ({args.requests} requests)...", file=sys.stderr)
        live, live_body = overview_timed(http, requests=args.requests)
        print("Rolling up the finished days...", file=sys.stderr)
        first_run, idle_run, days = rollup_filled()
        print(f"Measuring, finished days rolled up ({args.requests} requests)...", file=sys.stderr)
        rolled, rolled_body = overview_timed(http, requests=args.requests)
    print(
        f"\nGET /console/acme/overview.json, one after another, as alice; {rows:,} audit rows in the "
        f"table ({ACME_TOOL_CALLS:,} of them acme's tool calls in the last 30 days); loopback, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.requests} requests after "
        f"{WARMUP} warm-up each\n"
    )
    print("| finished days | p50 ms | p95 ms | mean ms | response bytes | target p50 |")
    print("|---|---:|---:|---:|---:|---|")
    for label, samples, body in (("aggregated live", live, live_body), ("rolled up", rolled, rolled_body)):
        met = "met" if samples.p50() < TARGET_P50_MS else "not met"
        print(
            f"| {label} | {samples.p50():.1f} | {samples.p95():.1f} | {samples.mean():.1f} | {len(body):,} "
            f"| < {TARGET_P50_MS} ms: {met} |"
        )
    same = json.loads(live_body) == json.loads(rolled_body)
    print(f"\nThe two answers are {'the same' if same else 'DIFFERENT'}.")
    print(
        f"The first roll-up ({days} days) took {first_run:.1f} s; "
        f"a second run, with nothing to do, {idle_run * 1000:.0f} ms."
    )
    queries_explained(env["DATABASE_URL"])


if __name__ == "__main__":
    main()
