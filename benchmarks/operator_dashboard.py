"""How fast the operators' dashboard answers on a million audit rows, with every day aggregated live
and then with the finished days read from the daily rollup.

    .venv/bin/python benchmarks/operator_dashboard.py [--requests 20]

Seeds as ``benchmarks/console_overview.py`` does (its ``audit_seed``: 1,000,000 ``tool.called``
rows of acme and 250,000 of globex over the last 30 days, 50,000 of acme's other actions, kept by
later runs), in its own PostgreSQL database (BENCH_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gatehouse_bench_operator_dashboard: migrated, then
``bootstrap_demo``), and counts rate limits in Redis database 14 (BENCH_REDIS_URL). It adds a
superuser, olga, who signs in through the admin's login view; Gatehouse runs under Daphne as
shipped, with no jobs worker. The rollup's tables are emptied, and after a warm-up she fetches
``GET /admin/dashboard.json`` and then the admin's index (the page renders the same series for its
tables) --requests times each, one after another, each timed: every day live. The script then rolls
the finished days up (``tool_call_days_roll_up``, timed) and she fetches both again. Prints p50, p95
and mean in ms, side by side, and whether the JSON's traffic (all but the health, which says when
it was read) is the same both ways. A measurement, not a test: it asserts nothing.
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
from console_overview import ACME_TOOL_CALLS, GLOBEX_TOOL_CALLS, audit_seed
from run_query_overhead import WARMUP, Samples, django_setup

OPERATOR = "olga"
PAGES = {"dashboard.json": "/admin/dashboard.json", "admin index": "/admin/"}


def operator_created(password: str) -> None:
    from accounts.models import User

    person, _ = User.objects.get_or_create(
        username=OPERATOR, defaults={"is_staff": True, "is_superuser": True}
    )
    person.set_password(password)
    person.save()


def signed_in(http: httpx.Client, *, password: str) -> None:
    """olga's session cookie, through the admin's login view as a browser gets it."""
    form = http.get("/admin/login/")
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    if match is None:
        raise RuntimeError("no CSRF token in the admin's login form")
    answer = http.post(
        "/admin/login/",
        data={
            "csrfmiddlewaretoken": match.group(1),
            "username": OPERATOR,
            "password": password,
            "next": "/admin/",
        },
        headers={"referer": str(http.base_url) + "/admin/login/"},
    )
    if answer.status_code != 302:
        raise RuntimeError(f"olga's sign-in answered HTTP {answer.status_code}")


def timed(http: httpx.Client, *, url: str, requests: int) -> tuple[Samples, bytes]:
    """The timings of ``requests`` GETs after the warm-up, and the last answer."""
    samples = Samples()
    body = b""
    for number in range(WARMUP + requests):
        began = time.perf_counter()
        answer = http.get(url)
        elapsed = time.perf_counter() - began
        if answer.status_code != 200:
            raise RuntimeError(f"{url} answered HTTP {answer.status_code}")
        if number >= WARMUP:
            samples.seconds.append(elapsed)
            body = answer.content
    return samples, body


def rollup_emptied(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE core_rolledupday, core_toolcallday, core_toolcalldaytotal,"
            " core_alltenantstoolcallday, core_alltenantstoolcalldaytotal"
        )


def rollup_filled() -> tuple[float, int]:
    from django.utils import timezone

    from core.audit.rollup.services import tool_call_days_roll_up

    began = time.perf_counter()
    days = tool_call_days_roll_up(now=timezone.now())
    return time.perf_counter() - began, len(days)


def traffic(body: bytes) -> dict[str, object]:
    return {key: value for key, value in json.loads(body).items() if key != "health"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20, help="timed GETs of each URL, each way")
    args = parser.parse_args()

    port = free_port()
    public = f"http://127.0.0.1:{port}"
    env = bench_env(
        public=public,
        name="operator_dashboard",
        REDIS_URL=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
    )
    print("Preparing the database (migrate, bootstrap_demo)...", file=sys.stderr)
    prepare_database(env)
    print("Seeding the audit rows (if missing)...", file=sys.stderr)
    rows = audit_seed(env["DATABASE_URL"])
    django_setup(env)
    operator_created(env["DEMO_PASSWORD"])
    rollup_emptied(env["DATABASE_URL"])
    results: dict[tuple[str, str], Samples] = {}
    bodies: dict[str, bytes] = {}
    first_run, days = 0.0, 0
    with daphne_serving(port=port, env=env), httpx.Client(base_url=public, timeout=120) as http:
        signed_in(http, password=env["DEMO_PASSWORD"])
        for way in ("aggregated live", "rolled up"):
            if way == "rolled up":
                print("Rolling up the finished days...", file=sys.stderr)
                first_run, days = rollup_filled()
            for name, url in PAGES.items():
                print(f"Measuring {name}, finished days {way} ({args.requests} requests)...", file=sys.stderr)
                results[(name, way)], body = timed(http, url=url, requests=args.requests)
                if name == "dashboard.json":
                    bodies[way] = body
    print(
        f"\nOne after another, as a superuser; {rows:,} audit rows in the table "
        f"({ACME_TOOL_CALLS + GLOBEX_TOOL_CALLS:,} of them tool calls of the last 30 days); loopback, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.requests} requests after "
        f"{WARMUP} warm-up each\n"
    )
    print("| URL | finished days | p50 ms | p95 ms | mean ms |")
    print("|---|---|---:|---:|---:|")
    for (name, way), samples in results.items():
        print(f"| {name} | {way} | {samples.p50():.1f} | {samples.p95():.1f} | {samples.mean():.1f} |")
    same = traffic(bodies["aggregated live"]) == traffic(bodies["rolled up"])
    print(f"\nThe two JSON answers' traffic is {'the same' if same else 'DIFFERENT'}.")
    print(f"The roll-up ({days} days) took {first_run:.1f} s.")


if __name__ == "__main__":
    main()
