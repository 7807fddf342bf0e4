"""The hot-path query returns raw column values; SQLite (what `make run` uses) returns text."""

from __future__ import annotations

from datetime import UTC, datetime

from oauth.bearer import as_datetime as _as_datetime


def test_sqlite_timestamps_are_read_as_aware_utc():
    assert _as_datetime("2026-11-25 23:01:02.345678") == datetime(2026, 11, 25, 23, 1, 2, 345678, tzinfo=UTC)


def test_postgres_timestamps_pass_through():
    moment = datetime(2026, 11, 25, 23, 1, 2, tzinfo=UTC)
    assert _as_datetime(moment) is moment
