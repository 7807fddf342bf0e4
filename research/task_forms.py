"""A literature search's checkpoint as the input request of a 2026-07-28 task, and the person's
answer to it as the decision it is (``research.task_runner``).

The job waiting at a checkpoint is the task ``input_required``: ``tasks/get`` shows one input
request, an ``elicitation/create`` form whose message summarizes the checkpoint and whose
``requestedSchema`` asks for the decision (``action``: approve, edit or reject) and the fields
``decide`` accepts at that checkpoint. Elicitation forms are flat and carry only strings, numbers,
booleans and enums, so lists of free text (``terms``, ``add_dois``) are strings, one item a line
(a list is accepted as well), and ``keep`` and ``sources`` are multi-selects. The request's key
names the checkpoint and the iteration, so an answer to a checkpoint already decided is refused
rather than applied to the next one.

Nothing here validates the decision itself: the kind does (``research.literature_job``), through
``search_decide``, as for the tool and the page, so every refusal reads the same everywhere.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import InvalidInput
from jobs.checkpoints import checkpoint_name
from jobs.models import Job
from research.literature_job import (
    ADD_DOIS_MAX,
    EARLIEST_YEAR,
    FINAL,
    MAX_RESULTS_MAX,
    PLAN,
    SCREENING,
    TERM_MAX_CHARS,
    TERMS_MAX,
)
from research.sources.registry import sources_offered

ACTIONS = ("approve", "edit", "reject")
PLAN_FIELDS = ("terms", "year_from", "year_to", "sources", "max_results")
# The fields of content that are not the decision's data.
DECISION_KEYS = frozenset({"action", "note"})
# The message lists this many papers; the form's multi-select names them all.
MESSAGE_PAPERS = 20
TITLE_CHARS = 120
MESSAGE_MAX_CHARS = 6000
NOTE_MAX_CHARS = 2000
_LIST_SEPARATORS = re.compile(r"[\n\r]+")
_DOI_SEPARATORS = re.compile(r"[\s,;]+")

ACTION_HELP = {
    PLAN: "approve: search with this plan; edit: search with the fields below; reject: stop the search.",
    SCREENING: (
        "approve: keep every candidate; edit: keep the papers chosen below and/or add DOIs; "
        "reject: search again with the plan fields below."
    ),
    FINAL: "approve: complete the search; edit: keep the papers chosen below; reject: back to screening.",
}


@dataclass(frozen=True, slots=True)
class Decision:
    action: str
    data: dict[str, Any] | None
    note: str | None


def request_key(*, job: Job) -> str:
    """The input request's key: the checkpoint's name (``jobs.checkpoints``)."""
    return checkpoint_name(kind=job.checkpoint_kind or "checkpoint", iteration=job.iteration)


def input_requests_of(*, job: Job) -> dict[str, Any]:
    """The job's pending checkpoint as the task's ``inputRequests`` (one form)."""
    kind = job.checkpoint_kind
    payload = dict(job.checkpoint or {})
    return {
        request_key(job=job): {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": _message(job=job, payload=payload),
                "requestedSchema": requested_schema(kind=kind, payload=payload),
            },
        }
    }


def requested_schema(*, kind: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "action": {
            "type": "string",
            "title": "Decision",
            "description": ACTION_HELP.get(kind, "approve, edit or reject."),
            "enum": list(ACTIONS),
        }
    }
    if kind == SCREENING:
        properties["keep"] = _papers_select(payload.get("candidates"), "Keep (edit)")
        properties["add_dois"] = {
            "type": "string",
            "title": "Add DOIs (edit)",
            "description": f"Up to {ADD_DOIS_MAX} DOIs, separated by spaces, commas or new lines.",
        }
    if kind in (PLAN, SCREENING):
        properties.update(_plan_properties(payload.get("plan") if kind == SCREENING else payload))
    if kind == FINAL:
        properties["keep"] = _papers_select(payload.get("papers"), "Keep (edit)")
    properties["note"] = {
        "type": "string",
        "title": "Note",
        "description": "Why, for the search's history (optional).",
        "maxLength": NOTE_MAX_CHARS,
    }
    return {"type": "object", "properties": properties, "required": ["action"]}


def _plan_properties(plan: object) -> dict[str, Any]:
    current = plan if isinstance(plan, Mapping) else {}
    next_year = datetime.date.today().year + 1
    terms = current.get("terms") or []
    return {
        "terms": {
            "type": "string",
            "title": "Search terms",
            "description": f"Up to {TERMS_MAX} terms, one a line. Now: {'; '.join(map(str, terms))}",
            "maxLength": TERMS_MAX * (TERM_MAX_CHARS + 1),
        },
        "year_from": _integer("From year", EARLIEST_YEAR, next_year),
        "year_to": _integer("To year", EARLIEST_YEAR, next_year),
        "sources": {
            "type": "array",
            "title": "Sources",
            "description": f"Now: {', '.join(map(str, current.get('sources') or []))}",
            "items": {"type": "string", "enum": list(sources_offered())},
        },
        "max_results": _integer("Papers at most", 1, MAX_RESULTS_MAX),
    }


def _integer(title: str, low: int, high: int) -> dict[str, Any]:
    return {"type": "integer", "title": title, "minimum": low, "maximum": high}


def _title(paper: Mapping[str, Any]) -> str:
    return str(paper.get("title", ""))[:TITLE_CHARS]


def _papers_select(papers: object, title: str) -> dict[str, Any]:
    listed = [p for p in papers if isinstance(p, Mapping)] if isinstance(papers, list) else []
    return {
        "type": "array",
        "title": title,
        "description": "The papers to keep (ids as in the message).",
        "items": {
            "anyOf": [{"const": str(p.get("id")), "title": f"{p.get('id')}. {_title(p)}"} for p in listed]
        },
    }


def _message(*, job: Job, payload: Mapping[str, Any]) -> str:
    kind = job.checkpoint_kind
    lines = [f"Literature search {job.id}, {kind} checkpoint: {payload.get('summary', '')}".strip()]
    if kind == PLAN:
        lines.append(f"Terms: {'; '.join(map(str, payload.get('terms') or []))}")
        lines.append(f"Sources: {', '.join(map(str, payload.get('sources') or []))}")
    papers = payload.get("candidates") if kind == SCREENING else payload.get("papers")
    if isinstance(papers, list):
        for paper in papers[:MESSAGE_PAPERS]:
            if isinstance(paper, Mapping):
                year = f" ({paper['year']})" if paper.get("year") else ""
                lines.append(f"{paper.get('id')}. {str(paper.get('title', ''))[:TITLE_CHARS]}{year}")
        if len(papers) > MESSAGE_PAPERS:
            lines.append(f"... and {len(papers) - MESSAGE_PAPERS} more (get_session, or the research page).")
    lines.append(ACTION_HELP.get(kind or "", ""))
    return "\n".join(lines)[:MESSAGE_MAX_CHARS]


def decision_of(*, job: Job, input_responses: Mapping[str, Any]) -> Decision | None:
    """The decision the answer to the job's pending request makes; None where the person declined
    or dismissed the form (nothing is decided, the task still waits). ``InvalidInput`` for an
    answer that is not one; the kind validates the decision's data itself."""
    key = request_key(job=job)
    if key not in input_responses:
        raise InvalidInput(
            f"inputResponses has no answer to the pending request {key!r} (tasks/get shows it).",
            data={"taskId": str(job.id), "pending": key},
        )
    response = input_responses[key]
    if not isinstance(response, Mapping):
        raise InvalidInput(f"The answer to {key!r} must be an elicitation result object.")
    outcome = response.get("action")
    if outcome in ("decline", "cancel"):
        return None
    if outcome != "accept":
        raise InvalidInput(f"The answer to {key!r} must have action accept, decline or cancel.")
    content = response.get("content")
    if not isinstance(content, Mapping):
        raise InvalidInput(f"The accepted answer to {key!r} needs content with the decision.")
    action = content.get("action")
    if not isinstance(action, str) or action not in ACTIONS:
        raise InvalidInput(f"content.action must be one of {', '.join(ACTIONS)}.")
    note = content.get("note")
    if note is not None and not isinstance(note, str):
        raise InvalidInput("content.note must be a string.")
    data: dict[str, Any] = {}
    for field, value in content.items():
        if field in DECISION_KEYS or value is None or value == "":
            continue  # a form's untouched fields
        data[str(field)] = _field_value(str(field), value)
    return Decision(action=action, data=data or None, note=note or None)


def _field_value(field: str, value: Any) -> Any:
    """The form's string for a list field as the list ``decide`` takes; anything else as it is."""
    if field == "terms" and isinstance(value, str):
        return [line for line in (part.strip() for part in _LIST_SEPARATORS.split(value)) if line]
    if field == "add_dois" and isinstance(value, str):
        return [part for part in _DOI_SEPARATORS.split(value) if part]
    return value
