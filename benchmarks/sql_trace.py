"""Gatehouse under Daphne with every SQL statement it sends recorded: for finding the statements
on the hot path (benchmarks/hot_path_explain.py), whatever code sends them.

    python benchmarks/sql_trace.py OUT.pickle -- [daphne's arguments]

It wraps psycopg's cursors (Django's connections and the endpoint's async pool both use them) and
the audit trail's wire connection (``core.db._WireConnection``, which drives libpq without one),
counting each statement by its shape (its text, with a multi-row ``VALUES`` list and a savepoint's
name counted as one) and keeping
the first parameters seen with its smallest form. SIGUSR1 forgets what was recorded so far (the
server's start); at exit the record is pickled to OUT.pickle: {sql: (count, example sql, params)}.
"""

from __future__ import annotations

import atexit
import enum
import json
import pickle
import re
import signal
import sys
import threading
from typing import Any

import psycopg
from bench_support import BASE_DIR

_VALUES = re.compile(r"VALUES (\([^()]*\))(?:, \([^()]*\))+")
_SAVEPOINT = re.compile(r'SAVEPOINT "[^"]*"')
_lock = threading.Lock()
_seen: dict[str, tuple[int, str, Any]] = {}


def shape(sql: str) -> str:
    return _SAVEPOINT.sub('SAVEPOINT "…"', _VALUES.sub(r"VALUES \1", sql))


def _record(query: Any, params: Any) -> None:
    sql = query if isinstance(query, str) else query.decode() if isinstance(query, bytes) else str(query)
    key = shape(sql)
    with _lock:
        count, example, example_params = _seen.get(key, (0, sql, params))
        if len(sql) < len(example):
            example, example_params = sql, params
        _seen[key] = (count + 1, example, example_params)


def _wrap(cls: Any, name: str, asynchronous: bool) -> None:
    original = getattr(cls, name)
    if asynchronous:

        async def traced_async(self: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
            _record(query, params)
            return await original(self, query, params, *args, **kwargs)

        setattr(cls, name, traced_async)
    else:

        def traced(self: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
            _record(query, params)
            return original(self, query, params, *args, **kwargs)

        setattr(cls, name, traced)


def _plain(value: Any) -> Any:
    """A parameter the reader can unpickle without the server's modules: enums (Django's choices)
    as their values, psycopg's JSON wrappers as JSON text, other objects of ours as text."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if hasattr(value, "obj") and hasattr(value, "dumps"):
        return json.dumps(value.obj)
    if type(value).__module__.split(".")[0] in {"builtins", "datetime", "uuid", "decimal"}:
        return value
    return str(value)


def _dump(path: str) -> None:
    with _lock, open(path, "wb") as out:
        seen = {key: (count, sql, _plain(params)) for key, (count, sql, params) in _seen.items()}
        pickle.dump(seen, out)


def main() -> None:
    out, separator, *daphne_args = sys.argv[1:]
    assert separator == "--", __doc__
    _wrap(psycopg.Cursor, "execute", asynchronous=False)
    _wrap(psycopg.AsyncCursor, "execute", asynchronous=True)
    # Run as a script, this folder is on the path but the project is not yet (Daphne adds it).
    sys.path.insert(0, str(BASE_DIR))
    from core.db import _WireConnection

    _wrap(_WireConnection, "execute", asynchronous=True)
    signal.signal(signal.SIGUSR1, lambda *_: _seen.clear())
    atexit.register(_dump, out)
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(daphne_args)


if __name__ == "__main__":
    main()
