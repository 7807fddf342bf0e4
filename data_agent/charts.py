"""Chart specifications built from a query's real result.

The explainer only chooses a chart type and which columns go where; every number in a chart comes
from the rows the executor returned, so a chart can never show a figure the query did not produce.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from data_agent.ask_schemas import ChartChoice

# More points than this make an unreadable chart and a large response.
MAX_CHART_POINTS = 500


class ChartUnusable(ValueError):
    """The chosen chart does not fit the result (a missing column, values that are not numbers)."""


def _as_number(value: Any) -> int | float | None:
    """The value as a number; exact decimals too large for a float arrive as strings (json_safe)."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    if isinstance(value, Decimal | str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ChartUnusable("not a number")


def _numbers(rows: Sequence[Sequence[Any]], index: int, name: str) -> list[int | float | None]:
    try:
        return [_as_number(row[index]) for row in rows]
    except ChartUnusable:
        raise ChartUnusable(f"Column {name!r} holds values that are not numbers.") from None


def _column(columns: Sequence[str], name: str) -> int:
    try:
        return list(columns).index(name)
    except ValueError:
        raise ChartUnusable(f"The result has no column {name!r}.") from None


def chart_spec_build(
    *, choice: ChartChoice, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> dict[str, Any]:
    """One chart of ``chart_specs``: ``categories``/``series`` for bar and line, ``slices`` for
    pie, ``points`` for scatter."""
    if not rows:
        raise ChartUnusable("The result has no rows to chart.")
    x = _column(columns, choice.x)
    ys = [(name, _column(columns, name)) for name in choice.y]
    shown = rows[:MAX_CHART_POINTS]
    values = {name: _numbers(shown, index, name) for name, index in ys}
    spec: dict[str, Any] = {"type": choice.type, "title": choice.title or ", ".join(choice.y)}
    if choice.type in ("bar", "line"):
        spec["xLabel"] = choice.x
        spec["categories"] = [row[x] for row in shown]
        spec["series"] = [{"name": name, "data": values[name]} for name, _ in ys]
    elif choice.type == "pie":
        name = ys[0][0]
        spec["valueLabel"] = name
        spec["slices"] = [{"label": row[x], "value": v} for row, v in zip(shown, values[name], strict=True)]
    else:
        name = ys[0][0]
        xs = _numbers(shown, x, choice.x)
        spec["xLabel"], spec["yLabel"] = choice.x, name
        spec["points"] = [{"x": a, "y": b} for a, b in zip(xs, values[name], strict=True)]
    if len(rows) > MAX_CHART_POINTS:
        spec["truncated"] = True
    return spec
