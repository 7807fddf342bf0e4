"""An opt-in SQL query counter (``GATEHOUSE_COUNT_QUERIES=true``) for benchmarks and diagnosis.

Every Django database connection the process opens gets an execute wrapper, and the endpoint's
own async pool (``db``) counts its queries here too; the total is written to stderr when the
process exits, as ``gatehouse-sql-queries: N``.
"""

from __future__ import annotations

import atexit
import itertools
import sys
from collections.abc import Callable
from typing import Any

from django.db.backends.signals import connection_created

_counter = itertools.count()
_count = 0


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
    print(f"gatehouse-sql-queries: {_count}", file=sys.stderr, flush=True)


def querycount_install() -> None:
    connection_created.connect(_instrument, weak=False)
    atexit.register(_report)
