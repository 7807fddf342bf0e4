"""A stored turn, shaped for a person to read on the conversation page.

A turn's ``output`` (the ``CommandOutput`` its client received) and ``traces`` are JSON written by
the workflow tools, but the page reads them as data of unknown shape: rows written by older code,
or by hand in the admin's database, must still show, never fail the page. So every field is read
with its type checked, and everything shown is bounded: parameters and other artifacts are
pretty-printed JSON cut to a length, a query's table to its first rows and columns (the template
cuts each cell).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from conversations.models import Turn

JSON_MAX_CHARS = 2_000
# Short JSON reads best on one line; longer, indented.
COMPACT_MAX_CHARS = 60
TABLE_MAX_ROWS = 50
TABLE_MAX_COLUMNS = 20
# More than any turn writes today; a page that stays readable (and quick) if one ever writes more.
TRACES_MAX = 200
RESPONSES_MAX = 50
NOT_SHOWN = "(not shown: too deeply nested)"
DIRECTIONS = {"agent_to_workflow": "Agent → workflow", "workflow_to_agent": "Workflow → agent"}


@dataclass(frozen=True, slots=True)
class CommandShown:
    name: str
    parameters: str


@dataclass(frozen=True, slots=True)
class TableShown:
    columns: list[str]
    rows: list[list[str]]
    total_rows: int

    @property
    def cut(self) -> bool:
        return self.total_rows > len(self.rows)


@dataclass(frozen=True, slots=True)
class ResponseShown:
    text: str
    table: TableShown | None
    other_artifacts: str
    next_actions: list[str]
    recommendations: list[str]


@dataclass(frozen=True, slots=True)
class TraceShown:
    at: datetime | None
    direction: str
    command_name: str
    raw_command: str
    parameters: str
    response_text: str
    success: bool | None


@dataclass(slots=True)
class TurnShown:
    number: int
    turn: Turn
    workflow_name: str = ""
    context: str = ""
    commands: list[CommandShown] = field(default_factory=list)
    responses: list[ResponseShown] = field(default_factory=list)
    traces: list[TraceShown] = field(default_factory=list)
    total_traces: int = 0

    @property
    def duration(self) -> str:
        milliseconds = self.turn.duration_ms
        return f"{milliseconds:.0f} ms" if milliseconds < 1000 else f"{milliseconds / 1000:.1f} s"

    @property
    def has_feedback(self) -> bool:
        return self.turn.feedback_score is not None or bool(self.turn.feedback_text)


def bounded_json(value: Any, *, max_chars: int = JSON_MAX_CHARS) -> str:
    """``value`` as JSON (indented when long), cut to ``max_chars`` (an empty object or list shows as "")."""
    if value in ({}, [], None, ""):
        return ""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        if len(text) > COMPACT_MAX_CHARS:
            text = json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    except (RecursionError, ValueError, TypeError):
        return NOT_SHOWN
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, bool)):
        return str(value)
    return bounded_json(value, max_chars=200)


def _table(artifacts: dict[str, Any]) -> TableShown | None:
    """The artifacts' ``columns`` and ``rows`` (each a list of values, or an object by column)."""
    columns = artifacts.get("columns")
    rows = artifacts.get("rows")
    if not isinstance(columns, list) or not columns or not isinstance(rows, list):
        return None
    names = [_cell(column) for column in columns[:TABLE_MAX_COLUMNS]]
    shown: list[list[str]] = []
    for row in rows[:TABLE_MAX_ROWS]:
        if isinstance(row, dict):
            shown.append([_cell(row.get(name)) for name in names])
        elif isinstance(row, list):
            cells = [_cell(cell) for cell in row[: len(names)]]
            shown.append(cells + [""] * (len(names) - len(cells)))
        else:
            shown.append([_cell(row)] + [""] * (len(names) - 1))
    return TableShown(columns=names, rows=shown, total_rows=len(rows))


def _response(value: Any) -> ResponseShown:
    response = _dict(value)
    artifacts = _dict(response.get("artifacts"))
    table = _table(artifacts)
    other = {key: item for key, item in artifacts.items() if table is None or key not in {"columns", "rows"}}
    return ResponseShown(
        text=_text(response.get("response")),
        table=table,
        other_artifacts=bounded_json(other),
        next_actions=[item for item in _list(response.get("next_actions")) if isinstance(item, str)],
        recommendations=[item for item in _list(response.get("recommendations")) if isinstance(item, str)],
    )


def _moment(milliseconds: Any) -> datetime | None:
    if isinstance(milliseconds, bool) or not isinstance(milliseconds, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _trace(value: Any) -> TraceShown:
    event = _dict(value)
    direction = _text(event.get("direction"))
    success = event.get("success")
    return TraceShown(
        at=_moment(event.get("timestamp")),
        direction=DIRECTIONS.get(direction, direction),
        command_name=_text(event.get("command_name")),
        raw_command=_text(event.get("raw_command")),
        parameters=bounded_json(event.get("parameters")),
        response_text=_text(event.get("response_text")),
        success=success if isinstance(success, bool) else None,
    )


def turn_shown(*, turn: Turn, number: int) -> TurnShown:
    """What the page shows of one turn: the command(s) it ran, its responses and its traces.

    A command turn names its command in its output; an agent's turn ran the commands its traces
    show going from the agent to the workflow."""
    output = _dict(turn.output)
    traces = _list(turn.traces)
    shown = TurnShown(
        number=number,
        turn=turn,
        workflow_name=_text(output.get("workflow_name")),
        context=_text(output.get("context")),
        responses=[_response(item) for item in _list(output.get("command_responses"))[:RESPONSES_MAX]],
        traces=[_trace(item) for item in traces[:TRACES_MAX]],
        total_traces=len(traces),
    )
    name = _text(output.get("command_name"))
    if name:
        shown.commands = [CommandShown(name=name, parameters=bounded_json(output.get("command_parameters")))]
    else:
        shown.commands = [
            CommandShown(
                name=_text(event.get("command_name")), parameters=bounded_json(event.get("parameters"))
            )
            for event in map(_dict, traces[:TRACES_MAX])
            if event.get("direction") == "agent_to_workflow" and _text(event.get("command_name"))
        ]
    return shown


def turns_shown(*, turns: list[Turn]) -> list[TurnShown]:
    return [turn_shown(turn=turn, number=number) for number, turn in enumerate(turns, start=1)]
