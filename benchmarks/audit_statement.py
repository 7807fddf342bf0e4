"""What psycopg spends turning one audit batch into a statement: ``%s`` placeholders against
PostgreSQL's own ``$1`` (a raw cursor), for the batch sizes the group-commit writer sends.

    .venv/bin/python benchmarks/audit_statement.py [--sizes 1,3,10,20,50,200] [--repeat 2000]

Times psycopg's own conversion (``PostgresQuery`` and ``PostgresRawQuery``, what a cursor does
before it sends anything) of ``core.audit.store.insert_sql`` with ``insert_params``, both forms side
by side in one run, on a connection to the benchmarks' database (``bench_support.bench_env``;
nothing is written there). psycopg caches the parse of a
``%s`` statement only up to 4 kB, about 8 rows here, and scans a longer one with regular
expressions every time. A measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import timeit
from collections.abc import Callable
from typing import Any

from bench_support import BASE_DIR, bench_env

# Any database will do: the statements are only converted, never sent.
POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,3,10,20,50,200")
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.update(bench_env(public="http://127.0.0.1:8000", name="audit"))
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL", POSTGRES)
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    import psycopg
    from psycopg._queries import PostgresQuery, PostgresRawQuery

    from core.audit.entry import AuditEntry
    from core.audit.store import insert_params, insert_sql
    from core.db import psycopg_connect_kwargs
    from core.models import AuditAction

    print("rows | %s placeholders (µs) | $n, raw cursor (µs) | ratio")
    print("---:|---:|---:|---:")
    with psycopg.connect(**psycopg_connect_kwargs()) as conn:
        for rows in (int(size) for size in args.sizes.split(",")):
            entries = [
                AuditEntry(
                    action=AuditAction.TOOL_CALLED,
                    target="test_simple_text",
                    username="alice",
                    client_id="bench-client",
                    request_id=f"req-{index}",
                    ip="127.0.0.1",
                    duration_ms=1.5,
                    detail={"arguments": {}, "era": "2026-07-28"},
                )
                for index in range(rows)
            ]
            params = insert_params(entries)
            portable, native = insert_sql(rows), insert_sql(rows, native=True)
            # A fresh query object per execution, as a cursor makes one; the transformer is reused.
            transformer = psycopg.adapt.Transformer(conn)

            timings = [
                _per_call(functools.partial(_convert, cls, transformer, sql, params), repeat=args.repeat)
                for cls, sql in ((PostgresQuery, portable), (PostgresRawQuery, native))
            ]
            print(f"{rows} | {timings[0]:.1f} | {timings[1]:.1f} | {timings[0] / timings[1]:.1f}x")


def _convert(query_class: Any, transformer: Any, sql: str, params: list[Any]) -> None:
    query_class(transformer).convert(sql, params)


def _per_call(work: Callable[[], None], *, repeat: int) -> float:
    """Microseconds per call of ``work``."""
    return timeit.timeit(work, number=repeat) / repeat * 1e6


if __name__ == "__main__":
    main()
