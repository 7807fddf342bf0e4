"""What the research pages' forms post, turned into what ``research.services`` takes.

A browser posts text: terms one per line, years and counts as digits, checkboxes as repeated
fields. These functions only change that shape (lines to lists, digits to numbers); every rule
about what a decision may hold stays in the job kind (``research.literature_job``), so a decision
made here is checked exactly as one made through an MCP client, and refused with the same words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict

from core.errors import InvalidInput
from jobs.checkpoints import checkpoint_parse
from research.literature_job import FINAL, PLAN, SCREENING

DEFAULT_MAX_RESULTS = 100
# A number typed in a form: a few digits; anything longer is refused before int() reads it.
_NUMBER_MAX_CHARS = 6
# DOIs pasted into the add box: one per line, or separated by spaces or commas.
_DOI_SEPARATORS = re.compile(r"[\s,;]+")

# The buttons of each checkpoint's form (their ``decision`` value) and the action each one takes.
DECISION_BUTTONS: dict[str, dict[str, str]] = {
    PLAN: {"approve": "approve", "edit": "edit", "reject": "reject"},
    SCREENING: {"approve": "approve", "keep": "edit", "refine": "reject"},
    FINAL: {"approve": "approve", "keep": "edit", "back": "reject"},
}
UNKNOWN_BUTTON = "Choose one of the form's buttons."
STALE_FORM = "This form is out of date (it names no checkpoint): reload the page and decide again."


@dataclass(frozen=True)
class Decision:
    action: str
    data: dict[str, Any] | None
    note: str | None
    checkpoint: str


def number_parse(raw: str, *, what: str) -> int | None:
    """A whole number typed in a form, or None when left empty."""
    text = raw.strip()
    if not text:
        return None
    if len(text) > _NUMBER_MAX_CHARS or not text.isascii() or not text.isdigit():
        raise InvalidInput(f"{what} must be a whole number.")
    return int(text)


def lines_parse(raw: str) -> list[str]:
    """The non-empty lines of a textarea, each stripped."""
    return [line.strip() for line in raw.splitlines() if line.strip()]


def start_input(post: QueryDict) -> dict[str, Any]:
    """``search_start``'s query, domain and max_results from the start form."""
    max_results = number_parse(str(post.get("max_results", "")), what="max_results")
    return {
        "query": str(post.get("query", "")),
        "domain": str(post.get("domain", "general")),
        "max_results": DEFAULT_MAX_RESULTS if max_results is None else max_results,
    }


def decision_parse(*, post: QueryDict) -> Decision:
    """The decision a checkpoint's form posted, as ``search_decide`` takes it, with the name of the
    checkpoint the form showed (``search_decide`` applies it only while the job waits there)."""
    posted = str(post.get("checkpoint", ""))
    parsed = checkpoint_parse(posted)
    if parsed is None:
        raise InvalidInput(STALE_FORM)
    checkpoint_kind = parsed[0]
    button = str(post.get("decision", ""))
    action = DECISION_BUTTONS.get(checkpoint_kind, {}).get(button)
    if action is None:
        raise InvalidInput(UNKNOWN_BUTTON)
    note = str(post.get("note", "")).strip() or None
    data: dict[str, Any] | None = None
    if checkpoint_kind == PLAN and action == "edit":
        data = _plan_fields(post, always=True)
    elif checkpoint_kind == SCREENING and action == "edit":
        data = {"keep": [str(item) for item in post.getlist("keep")]}
        add_dois = [doi for doi in _DOI_SEPARATORS.split(str(post.get("add_dois", ""))) if doi]
        if add_dois:
            data["add_dois"] = add_dois
    elif checkpoint_kind == SCREENING and action == "reject":
        data = _plan_fields(post, always=False) or None
    elif checkpoint_kind == FINAL and action == "edit":
        data = {"keep": [str(item) for item in post.getlist("keep")]}
    return Decision(action=action, data=data, note=note, checkpoint=posted)


def _plan_fields(post: QueryDict, *, always: bool) -> dict[str, Any]:
    """The plan's fields from a form: all of them when editing the plan (what the form shows is the
    plan), only those filled in when refining at screening (the rest stay as they were)."""
    data: dict[str, Any] = {}
    terms = lines_parse(str(post.get("terms", "")))
    if terms or always:
        data["terms"] = terms
    for field in ("year_from", "year_to"):
        year = number_parse(str(post.get(field, "")), what=field)
        if year is not None or always:
            data[field] = year
    if always:
        data["sources"] = [str(item) for item in post.getlist("sources")]
    max_results = number_parse(str(post.get("max_results", "")), what="max_results")
    if max_results is not None:
        data["max_results"] = max_results
    return data
