"""The literature search: a job (``jobs``) that asks a person three times.

1. ``plan``: the query terms, years and sources it will search. Approve, edit the plan (it searches
   with the edited one), or reject to stop.
2. ``screening``: the candidates found (title, authors, year, venue, abstract snippet), with any
   source that failed. Approve all, edit to keep a subset and/or add DOIs, or reject to refine the
   query (new terms or years) and search again.
3. ``final``: the selection. Approve to complete; edit to keep a subset of it (asked again); reject
   to go back to screening.

A paper's id (``p1``, ``p2``, ...) is given when it is first shown and means that paper at every
later checkpoint and in the result (``research.paper_ids``).

Each decision that does not complete the job is one more iteration. The steps that touch the network
(``search``, ``resolve``) run in a worker; decisions that only move between checkpoints do not.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from jobs.kinds import (
    Checkpoint,
    Complete,
    DecisionOutcome,
    JobFailed,
    JobView,
    NextStep,
    ProgressReport,
    Stop,
)
from research.paper_ids import papers_identified, papers_kept, papers_numbered
from research.records import Paper, doi_normalize, papers_merge
from research.sources.base import SearchPlan, SourceError
from research.sources.registry import DOMAINS, SOURCE_NAMES, source_get, sources_for_domain, sources_offered

KIND = "literature_search"
PLAN, SCREENING, FINAL = "plan", "screening", "final"
QUERY_MAX_CHARS = 500
TERM_MAX_CHARS = 200
TERMS_MAX = 20
MAX_RESULTS_MAX = 500
ADD_DOIS_MAX = 100
EARLIEST_YEAR = 1600


class LiteratureSearch:
    name = KIND
    checkpoint_kinds: tuple[str, ...] = (PLAN, SCREENING, FINAL)

    # -- input and plan ----------------------------------------------------------------------------
    def validate_input(self, *, job_input: Mapping[str, Any]) -> dict[str, Any]:
        query = _text(job_input.get("query"), what="query", max_chars=QUERY_MAX_CHARS)
        domain = job_input.get("domain", "general")
        if domain not in DOMAINS:
            raise InvalidInput(f"domain must be one of {', '.join(DOMAINS)}.")
        max_results = _int(job_input.get("max_results", 100), what="max_results", low=1, high=MAX_RESULTS_MAX)
        if not sources_for_domain(domain):
            raise InvalidInput("No literature source is offered here (RESEARCH_SOURCES is empty).")
        return {"query": query, "domain": domain, "max_results": max_results}

    def first_step(self, *, job_input: Mapping[str, Any]) -> NextStep:
        return NextStep(step="plan", context={}, message="Drafting the search plan.")

    # -- steps -------------------------------------------------------------------------------------
    def run_step(self, *, job: JobView, step: str, report: ProgressReport) -> Any:
        if step == "plan":
            return self._plan_checkpoint(job=job)
        if step == "search":
            return self._search(job=job, report=report)
        if step == "resolve":
            return self._resolve(job=job, report=report)
        raise JobFailed(f"Unknown step {step!r}.")

    def _plan_checkpoint(self, *, job: JobView) -> Checkpoint:
        plan = SearchPlan(
            terms=(job.input["query"],),
            year_from=None,
            year_to=None,
            sources=sources_for_domain(job.input["domain"]),
            max_results=job.input["max_results"],
        )
        return _plan_checkpoint(plan=plan, context={"plan": plan.as_json()})

    def _search(self, *, job: JobView, report: ProgressReport) -> Checkpoint:
        plan = SearchPlan.from_json(job.context["plan"])
        found: list[Paper] = []
        failures: dict[str, str] = {}
        for name in plan.sources:
            report(f"Searching {name}.")
            try:
                found.extend(
                    source_get(name).search(plan=plan, tenant_id=job.tenant_id, limit=plan.max_results)
                )
            except SourceError as error:
                failures[name] = error.message
        candidates, ids = papers_identified(
            context=job.context, papers=papers_merge(found)[: plan.max_results]
        )
        context = {**job.context, **ids, "candidates": candidates, "failures": failures}
        return _screening_checkpoint(context=context)

    def _resolve(self, *, job: JobView, report: ProgressReport) -> Checkpoint:
        selection = papers_numbered(job.context["selection"])
        have = {doi for doi in (doi_normalize(p.get("doi") or "") for p in selection) if doi}
        added: list[Paper] = []
        failures: dict[str, str] = {}
        for doi in job.context.get("add_dois", []):
            if doi in have:
                continue
            report(f"Looking up {doi}.")
            paper = None
            for name in ("library", "crossref", "openalex"):
                if name not in sources_offered():
                    continue
                try:
                    paper = source_get(name).lookup_doi(doi=doi, tenant_id=job.tenant_id)
                except SourceError as error:
                    failures[f"{name} ({doi})"] = error.message
                    continue
                if paper is not None:
                    break
            added.append(paper or Paper(title=f"DOI {doi}", doi=doi, url=f"https://doi.org/{doi}"))
            have.add(doi)
        # A paper added back after it was dropped gets its id back; a new one the next id.
        stored, ids = papers_identified(context=job.context, papers=added, taken=[p["id"] for p in selection])
        context = {**job.context, **ids, "selection": selection + stored, "add_dois": []}
        return _final_checkpoint(context=context, failures=failures)

    # -- decisions ---------------------------------------------------------------------------------
    def decide(self, *, job: JobView, action: str, data: Mapping[str, Any] | None) -> DecisionOutcome:
        data = data or {}
        reason = text_unstorable_reason(dict(data))
        if reason:
            raise InvalidInput(f"data {reason}.")
        if job.checkpoint_kind == PLAN:
            return self._decide_plan(job=job, action=action, data=data)
        if job.checkpoint_kind == SCREENING:
            return self._decide_screening(job=job, action=action, data=data)
        if job.checkpoint_kind == FINAL:
            return self._decide_final(job=job, action=action, data=data)
        raise InvalidInput(f"Unknown checkpoint {job.checkpoint_kind!r}.")

    def _decide_plan(self, *, job: JobView, action: str, data: Mapping[str, Any]) -> DecisionOutcome:
        if action == "reject":
            return Stop("The search plan was rejected; nothing was searched.")
        plan = SearchPlan.from_json(job.context["plan"])
        if action == "edit":
            _only(data, {"terms", "year_from", "year_to", "sources", "max_results"}, checkpoint=PLAN)
            plan = _plan_edited(plan, data)
        elif data:
            raise InvalidInput("approve takes no data; use edit to change the plan.")
        return NextStep(step="search", context={**job.context, "plan": plan.as_json()}, message="Searching.")

    def _decide_screening(self, *, job: JobView, action: str, data: Mapping[str, Any]) -> DecisionOutcome:
        candidates = list(job.context.get("candidates", []))
        if action == "approve":
            if data:
                raise InvalidInput("approve takes no data; use edit to keep a subset or add DOIs.")
            return _final_checkpoint(context={**job.context, "selection": papers_numbered(candidates)})
        if action == "edit":
            _only(data, {"keep", "add_dois"}, checkpoint=SCREENING)
            if "keep" not in data and "add_dois" not in data:
                raise InvalidInput("edit at screening needs keep (candidate ids) and/or add_dois.")
            selection = (
                papers_kept(papers=candidates, keep=data["keep"], checkpoint=SCREENING)
                if "keep" in data
                else papers_numbered(candidates)
            )
            add_dois = _dois(data.get("add_dois", []))
            context = {**job.context, "selection": selection, "add_dois": add_dois}
            if add_dois:
                return NextStep(step="resolve", context=context, message="Looking up the added DOIs.")
            return _final_checkpoint(context=context)
        # reject: refine and search again.
        _only(data, {"terms", "year_from", "year_to", "sources", "max_results"}, checkpoint=SCREENING)
        plan = _plan_edited(SearchPlan.from_json(job.context["plan"]), data)
        return NextStep(
            step="search", context={**job.context, "plan": plan.as_json()}, message="Searching again."
        )

    def _decide_final(self, *, job: JobView, action: str, data: Mapping[str, Any]) -> DecisionOutcome:
        selection = list(job.context.get("selection", []))
        if action == "approve":
            if data:
                raise InvalidInput("approve takes no data; use edit to keep a subset.")
            return Complete(
                result=_result(job=job, selection=papers_numbered(selection)), message="Complete."
            )
        if action == "edit":
            _only(data, {"keep"}, checkpoint=FINAL)
            if "keep" not in data:
                raise InvalidInput("edit at final needs keep (the ids of the papers to keep).")
            kept = papers_kept(papers=selection, keep=data["keep"], checkpoint=FINAL)
            return _final_checkpoint(context={**job.context, "selection": kept})
        if data:
            raise InvalidInput("reject at final takes no data; it goes back to screening.")
        return _screening_checkpoint(context=dict(job.context))


literature_search = LiteratureSearch()


# -- checkpoints -----------------------------------------------------------------------------------
def _plan_checkpoint(*, plan: SearchPlan, context: dict[str, Any]) -> Checkpoint:
    years = _years_text(plan)
    summary = (
        f"Search {', '.join(plan.sources)} for {plan.query_text()}{years}, up to {plan.max_results} papers."
    )
    payload = {**plan.as_json(), "available_sources": list(sources_offered()), "summary": summary}
    return Checkpoint(kind=PLAN, payload=payload, context=context, message="Waiting for the plan's approval.")


def _screening_checkpoint(*, context: dict[str, Any]) -> Checkpoint:
    candidates = papers_numbered(context.get("candidates", []))
    failures = dict(context.get("failures", {}))
    summary = f"{len(candidates)} candidate paper(s) found."
    if failures:
        summary += f" Failed sources: {', '.join(sorted(failures))}."
    payload = {
        "summary": summary,
        "candidates": [_candidate(paper) for paper in candidates],
        "failures": failures,
        "plan": context["plan"],
    }
    return Checkpoint(kind=SCREENING, payload=payload, context=context, message="Waiting for screening.")


def _final_checkpoint(*, context: dict[str, Any], failures: Mapping[str, str] | None = None) -> Checkpoint:
    selection = papers_numbered(context.get("selection", []))
    summary = f"{len(selection)} paper(s) selected; approve to complete."
    payload = {
        "summary": summary,
        "papers": [_candidate(paper) for paper in selection],
        "failures": dict(failures or {}),
    }
    return Checkpoint(kind=FINAL, payload=payload, context=context, message="Waiting for the final sign-off.")


def _candidate(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored paper (with its id, ``research.paper_ids``) as a checkpoint shows it."""
    paper = Paper.from_json(stored)
    return {
        "id": stored["id"],
        "title": paper.title,
        "authors": list(paper.authors),
        "year": paper.year,
        "venue": paper.venue,
        "doi": paper.doi,
        "abstract": paper.snippet(),
        "sources": list(paper.sources),
    }


def _result(*, job: JobView, selection: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "query": job.input["query"],
        "plan": job.context["plan"],
        "paper_count": len(selection),
        "summary": f"{len(selection)} paper(s) selected for {job.input['query']!r}.",
        "papers": selection,
    }


# -- validation ------------------------------------------------------------------------------------
def _only(data: Mapping[str, Any], allowed: set[str], *, checkpoint: str) -> None:
    unknown = sorted(str(key)[:40] for key in data if key not in allowed)
    if unknown:
        raise InvalidInput(
            f"Unknown field(s) for the {checkpoint} checkpoint: {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}."
        )


def _plan_edited(plan: SearchPlan, data: Mapping[str, Any]) -> SearchPlan:
    terms = plan.terms
    if "terms" in data:
        raw = data["terms"]
        if not isinstance(raw, list) or not raw or len(raw) > TERMS_MAX:
            raise InvalidInput(f"terms must be a list of 1 to {TERMS_MAX} strings.")
        terms = tuple(_text(term, what="each term", max_chars=TERM_MAX_CHARS) for term in raw)
    year_from = _year(data["year_from"], what="year_from") if "year_from" in data else plan.year_from
    year_to = _year(data["year_to"], what="year_to") if "year_to" in data else plan.year_to
    if year_from is not None and year_to is not None and year_from > year_to:
        raise InvalidInput("year_from is after year_to.")
    sources = plan.sources
    if "sources" in data:
        raw = data["sources"]
        offered = sources_offered()
        if not isinstance(raw, list) or not raw or not all(isinstance(s, str) for s in raw):
            raise InvalidInput(f"sources must be a non-empty list of: {', '.join(offered)}.")
        unknown = [s[:40] for s in raw if s not in offered]
        if unknown:
            raise InvalidInput(f"Unknown source(s) {', '.join(unknown)}; offered: {', '.join(offered)}.")
        sources = tuple(name for name in SOURCE_NAMES if name in raw)
    max_results = plan.max_results
    if "max_results" in data:
        max_results = _int(data["max_results"], what="max_results", low=1, high=MAX_RESULTS_MAX)
    return SearchPlan(
        terms=terms, year_from=year_from, year_to=year_to, sources=sources, max_results=max_results
    )


def _dois(raw: object) -> list[str]:
    if not isinstance(raw, list) or len(raw) > ADD_DOIS_MAX:
        raise InvalidInput(f"add_dois must be a list of at most {ADD_DOIS_MAX} DOIs.")
    dois: list[str] = []
    for item in raw:
        doi = doi_normalize(item)
        if not doi:
            raise InvalidInput(f"Not a DOI: {str(item)[:60]!r} (expected 10.NNNN/...).")
        if doi not in dois:
            dois.append(doi)
    return dois


def _text(value: object, *, what: str, max_chars: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be a non-empty string.")
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is longer than {max_chars} characters.")
    reason = text_unstorable_reason(value)
    if reason:
        raise InvalidInput(f"{what} {reason}.")
    if any(ord(ch) < 32 for ch in value):
        raise InvalidInput(f"{what} contains control characters.")
    return " ".join(value.split())


def _int(value: object, *, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{what} must be a whole number from {low} to {high}.")
    return value


def _year(value: object, *, what: str) -> int | None:
    if value is None:
        return None
    return _int(value, what=what, low=EARLIEST_YEAR, high=datetime.date.today().year + 1)


def _years_text(plan: SearchPlan) -> str:
    if plan.year_from and plan.year_to:
        return f" from {plan.year_from} to {plan.year_to}"
    if plan.year_from:
        return f" from {plan.year_from}"
    if plan.year_to:
        return f" up to {plan.year_to}"
    return ""
