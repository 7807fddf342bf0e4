"""Named parameters (``:region``) of a gated query, bound by the driver and never pasted into SQL.

The gate keeps each ``:name`` as a placeholder in the query it rebuilds: PostgreSQL's renders it as
``%(name)s`` (psycopg's named style) and SQLite's keeps ``:name``. With a parameter mapping,
psycopg reads *every* ``%`` of the text as a placeholder marker, so a literal ``LIKE 'A%'`` would
break (or be read as a placeholder): the text psycopg gets is rendered again from the gated tree,
each placeholder stood in for by a random marker, every other ``%`` doubled, then the markers
turned into ``%(name)s``. A literal cannot forge a marker it cannot guess.

Every placeholder needs a value and every value a placeholder: a mismatch is the caller's mistake,
said plainly, rather than the driver's error (or a silently ignored value).
"""

from __future__ import annotations

import datetime
import math
import secrets
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from sqlglot import exp

from core.errors import InvalidInput
from data_agent.sql_gate import GatedQuery

PARAMETER_MISSING = "The query has a placeholder with no value: {names}."
PARAMETER_UNUSED = "A value was given for a placeholder the query does not have: {names}."
PARAMETER_UNNAMED = (
    "The query has a placeholder that is not of the form :name ({found}); only named ones are bound."
)
PARAMETER_TYPE = "The value of {name} is not a string, number, boolean, date or null."
PARAMETER_TEXT = "The value of {name} {reason}."
PARAMETER_NUMBER = "The value of {name} is not a finite number."
STRING_MAX_CHARS = 100_000

_SCALARS = (str, bool, int, float, Decimal, datetime.date, datetime.datetime, datetime.time)


def sql_placeholders(*, gated: GatedQuery) -> frozenset[str]:
    """The names of the query's ``:name`` placeholders; InvalidInput for any other kind."""
    names = set()
    for node in gated.expression.find_all(exp.Placeholder, exp.Parameter):
        name = _placeholder_name(node)
        if name is None:
            raise InvalidInput(
                PARAMETER_UNNAMED.format(found=node.sql(dialect=gated.dialect)[:40]),
                data={"reason": "parameter_unnamed"},
            )
        names.add(name)
    return frozenset(names)


def _placeholder_name(node: exp.Expr) -> str | None:
    # The gate's PostgreSQL text (``%(name)s``) parses back with the name as an identifier.
    this = node.args.get("this") if isinstance(node, exp.Placeholder) else None
    if isinstance(this, exp.Identifier):
        this = this.this
    return this if isinstance(this, str) and this else None


def sql_parameters_bind(*, gated: GatedQuery, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The text and values the driver binds, checked against the query's placeholders."""
    names = sql_placeholders(gated=gated)
    missing = sorted(names - set(params))
    if missing:
        raise InvalidInput(
            PARAMETER_MISSING.format(names=", ".join(missing)),
            data={"reason": "parameter_missing", "parameters": missing},
        )
    unused = sorted(str(key)[:70] for key in params if key not in names)
    if unused:
        raise InvalidInput(
            PARAMETER_UNUSED.format(names=", ".join(unused)),
            data={"reason": "parameter_unused", "parameters": unused},
        )
    values = {name: _value(name, value, dialect=gated.dialect) for name, value in params.items()}
    if gated.dialect != "postgres":
        return gated.sql, values
    return _postgres_text(gated), values


def _value(name: str, value: Any, *, dialect: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, _SCALARS):
        raise InvalidInput(PARAMETER_TYPE.format(name=name), data={"reason": "parameter_type", "name": name})
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(
            PARAMETER_NUMBER.format(name=name), data={"reason": "parameter_type", "name": name}
        )
    if isinstance(value, str):
        reason = _text_problem(value, dialect=dialect)
        if reason:
            raise InvalidInput(
                PARAMETER_TEXT.format(name=name, reason=reason),
                data={"reason": "parameter_text", "name": name},
            )
    if dialect == "sqlite":
        # SQLite has no date type: the sample (and most SQLite data) stores ISO text, which compares
        # in date order.
        if isinstance(value, datetime.date | datetime.datetime | datetime.time):
            return value.isoformat()
        if isinstance(value, Decimal):
            return str(value)
    return value


def _text_problem(value: str, *, dialect: str) -> str | None:
    if len(value) > STRING_MAX_CHARS:
        return f"is longer than {STRING_MAX_CHARS:,} characters"
    try:
        value.encode()
    except UnicodeEncodeError:
        return "contains an unpaired surrogate, which is not valid Unicode"
    # PostgreSQL's text cannot hold NUL; SQLite binds it like any other character.
    if dialect == "postgres" and "\x00" in value:
        return "contains a NUL character (\\u0000), which PostgreSQL text cannot hold"
    return None


def _postgres_text(gated: GatedQuery) -> str:
    nonce = secrets.token_hex(8)
    markers: dict[str, str] = {}

    def stand_in(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            name = str(_placeholder_name(node))
            marker = markers.setdefault(name, f"gatehouse{nonce}p{len(markers)}q")
            return exp.Var(this=marker)
        return node

    text = gated.expression.copy().transform(stand_in).sql(dialect="postgres", comments=False)
    text = text.replace("%", "%%")
    for name, marker in markers.items():
        text = text.replace(marker, f"%({name})s")
    return text
