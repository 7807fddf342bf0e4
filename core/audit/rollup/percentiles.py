"""Percentiles of tool-call durations, as PostgreSQL's ``percentile_cont`` computes them, with the
same interpolation in Python for databases without it (a development run's SQLite file)."""

from __future__ import annotations

import math

from django.db.models import Aggregate, FloatField

PERCENTILES = {"p50": 0.5, "p95": 0.95}


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont``: the percentile of a group, interpolated between rows."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def percentile_interpolated(ordered: list[float], fraction: float) -> float | None:
    """``percentile_cont``'s answer for values in ascending order: linear between the two nearest."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    below, above = math.floor(position), math.ceil(position)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)
