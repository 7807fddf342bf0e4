"""An opt-in SQL query counter (``GATEHOUSE_COUNT_QUERIES=true``) for benchmarks and diagnosis.

Every Django database connection the process opens gets an execute wrapper, and the endpoint's
own async pool (``db``) counts its queries here too; the total is written to stderr when the
process exits, as ``gatehouse-sql-queries: N``: at exit, or, in a server's worker that is a
multiprocessing child (granian's), when multiprocessing finishes it (such a child skips ``atexit``).
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing.util
import sys
from collections.abc import Callable
from typing import Any

from django.db.backends.signals import connection_created

_counter = itertools.count()
_count = 0
_reported = False


def querycount_add() -> None:
    global _count
    _count = next(_counter) + 1


def _count_query(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    querycount_add()
    return execute(sql, params, many, context)


def _instrument(sender: Any, connection: Any, **kwargs: Any) -> None:
    connection.execute_wrappers.append(_count_query)


def _report() -> None:
    # Once: in a main process both the atexit hook and multiprocessing's own exit hook call it.
    global _reported
    if _reported:
        return
    _reported = True
    print(f"gatehouse-sql-queries: {_count}", file=sys.stderr, flush=True)


def querycount_install() -> None:
    connection_created.connect(_instrument, weak=False)
    atexit.register(_report)
    multiprocessing.util.Finalize(None, _report, exitpriority=0)
