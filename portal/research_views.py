"""A signed-in person's literature searches (``/research/``): their jobs, a form to start one, and
each job's page, where the pending checkpoint is a form, so a search started from an MCP client can
be steered from the browser, and the other way round.

Every job is looked up through ``research.services`` in one of the person's active tenants, so
another person's job, another tenant's, a malformed id and an unknown one are all the same 404
(the HTTP twin of -32002). Starting, deciding and cancelling change data, which the MCP tools keep
to the ``mcp:write`` scope that only admins and contributors hold: a viewer may follow their jobs
here but is refused (403) those three, and the page says so. Decisions go through
``search_decide(channel="web")``; a refused one re-renders the form with the kind's own message.
The steps themselves run in the worker (``manage.py jobs_worker``), never in this request.
"""

from __future__ import annotations

import json
import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.models import Membership, Role, User
from accounts.selectors import membership_list_for_user
from core.errors import InvalidInput, PermissionDenied
from core.text_safety import storable_text
from jobs.checkpoints import checkpoint_pending, checkpoint_shown
from jobs.errors import JobNotFound
from jobs.models import Job, JobState
from jobs.selectors import job_decisions, job_id_parse, job_list
from portal.research_forms import DEFAULT_MAX_RESULTS, decision_parse, start_input
from research.exports import EXPORT_FORMATS, export_render
from research.literature_job import KIND, MAX_RESULTS_MAX, QUERY_MAX_CHARS
from research.services import search_cancel, search_decide, search_get, search_result, search_start
from research.sources.registry import DOMAINS

LIST_LIMIT = 100
# How often the page of a running job reloads itself (a meta refresh: no script runs here).
REFRESH_SECONDS = 3
VIEWER_REFUSED = (
    "Viewers can follow their searches here but not start, steer or cancel one: that needs the "
    "admin or contributor role in the tenant, as the research tools' mcp:write scope does."
)
NO_WRITABLE_TENANT = "You are a viewer in each of your tenants, so you cannot start a search here."
CHOOSE_TENANT = "Choose one of your tenants."
STARTED = "The search started; its plan appears here once the worker has drafted it."
DECIDED = "Your decision was recorded."
DECIDED_ALREADY = "That decision was already recorded; nothing changed."
CANCELLED = "The search was cancelled; nothing of it runs again."
WRITE_ROLES = frozenset({Role.ADMIN, Role.CONTRIBUTOR})
EXPORTS: dict[str, tuple[str, str, str]] = {
    # format: (file extension, content type, link text)
    "json": ("json", "application/json", "JSON"),
    "bibtex": ("bib", "application/x-bibtex; charset=utf-8", "BibTeX"),
    "markdown": ("md", "text/markdown; charset=utf-8", "Markdown"),
}
_FILENAME_UNSAFE = re.compile(r"[^a-z0-9]+")


def _person(request: HttpRequest) -> User:
    # login_required has run, so this is a signed-in person, never AnonymousUser.
    assert isinstance(request.user, User)
    return request.user


def _memberships(person: User) -> list[Membership]:
    return list(membership_list_for_user(user=person))


def _job_for_person(person: User, job_id: str) -> tuple[Job, Membership]:
    """The person's literature search ``job_id`` in one of their active tenants, with that
    membership, or ``JobNotFound``: each tenant is asked through ``search_get``, which scopes it."""
    job_id_parse(job_id=job_id)
    for membership in _memberships(person):
        try:
            job = search_get(tenant_id=membership.tenant_id, user_id=person.pk, session_id=job_id)
        except JobNotFound:
            continue
        return job, membership
    raise JobNotFound(job_id=job_id)


def _writer_check(membership: Membership) -> None:
    if membership.role not in WRITE_ROLES:
        raise PermissionDenied(VIEWER_REFUSED)


def _shown(value: str) -> str:
    """A submitted value shown back in its field: a NUL or lone surrogate made visible."""
    return storable_text(value)[0]


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def research_list(request: HttpRequest) -> HttpResponse:
    person = _person(request)
    memberships = _memberships(person)
    writable = [m for m in memberships if m.role in WRITE_ROLES]
    error = ""
    form = {"query": "", "domain": "general", "max_results": str(DEFAULT_MAX_RESULTS), "tenant": ""}
    if request.method == "POST":
        form = {key: _shown(str(request.POST.get(key, form[key]))) for key in form}
        slug = str(request.POST.get("tenant", ""))
        membership = next((m for m in memberships if m.tenant.slug == slug), None)
        if not slug and len(memberships) == 1:
            membership = memberships[0]
        if membership is None:
            error = CHOOSE_TENANT
        else:
            _writer_check(membership)
            try:
                job = _start(person=person, membership=membership, request=request)
            except InvalidInput as refusal:
                error = refusal.message
            else:
                messages.success(request, STARTED)
                return redirect("research:detail", job_id=job.pk)
    jobs = sorted(
        (
            job
            for membership in memberships
            for job in job_list(
                tenant_id=membership.tenant_id, user_id=person.pk, kind=KIND, limit=LIST_LIMIT
            )
        ),
        key=lambda job: job.created,
        reverse=True,
    )[:LIST_LIMIT]
    tenant_names = {m.tenant_id: m.tenant.name for m in memberships}
    context = {
        "rows": [{"job": job, "tenant": tenant_names.get(job.tenant_id, "")} for job in jobs],
        "memberships": memberships,
        "writable": writable,
        "form": form,
        "error": error,
        "domains": DOMAINS,
        "query_max": QUERY_MAX_CHARS,
        "max_results_max": MAX_RESULTS_MAX,
        "viewer_refused": NO_WRITABLE_TENANT if memberships and not writable else "",
    }
    return render(request, "research/list.html", context, status=422 if error else 200)


def _start(*, person: User, membership: Membership, request: HttpRequest) -> Job:
    job_input = start_input(request.POST)
    return search_start(tenant_id=membership.tenant_id, user_id=person.pk, origin="web", **job_input)


def _detail_render(
    request: HttpRequest, *, job: Job, membership: Membership, error: str = "", status: int = 200
) -> HttpResponse:
    checkpoint = dict(job.checkpoint or {})
    context = {
        "job": job,
        "tenant": membership.tenant,
        "can_write": membership.role in WRITE_ROLES,
        "viewer_refused": VIEWER_REFUSED,
        "checkpoint": checkpoint,
        "checkpoint_name": checkpoint_pending(job),
        "plan_terms": "\n".join(checkpoint.get("terms", [])) if job.checkpoint_kind == "plan" else "",
        "decisions": [
            {
                "decision": decision,
                "data": json.dumps(decision.data, indent=1, ensure_ascii=False) if decision.data else "",
            }
            for decision in job_decisions(job=job)
        ],
        "error": error,
        "refresh": REFRESH_SECONDS if job.state == JobState.RUNNING else None,
        "exports": [(fmt, EXPORTS[fmt][2]) for fmt in EXPORT_FORMATS if fmt in EXPORTS],
        # A refused decision's form is filled again with what was posted, not with the checkpoint.
        "refill": request.method == "POST" and "decision" in request.POST,
        "posted": {key: _shown(str(value)) for key, value in request.POST.items()},
        "posted_keep": [str(item) for item in request.POST.getlist("keep")],
        "posted_sources": [str(item) for item in request.POST.getlist("sources")],
        "cancellable": not job.is_finished,
    }
    return render(request, "research/detail.html", context, status=status)


@never_cache
@login_required
@require_GET
def research_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job, membership = _job_for_person(_person(request), job_id)
    # The page shows the pending checkpoint (a tool's decide may follow it without naming it).
    checkpoint_shown(job=job)
    return _detail_render(request, job=job, membership=membership)


@never_cache
@login_required
@require_POST
def research_decide(request: HttpRequest, job_id: str) -> HttpResponse:
    person = _person(request)
    job, membership = _job_for_person(person, job_id)
    _writer_check(membership)
    try:
        decision = decision_parse(post=request.POST)
        # Applied only while the job waits at the checkpoint the page showed; the same decision
        # posted again (a double submit) is answered as the first and stored once.
        decided = search_decide(
            tenant_id=membership.tenant_id,
            user_id=person.pk,
            session_id=job.pk,
            action=decision.action,
            data=decision.data,
            note=decision.note,
            channel="web",
            checkpoint=decision.checkpoint,
        )
    except InvalidInput as refusal:
        job.refresh_from_db()
        return _detail_render(request, job=job, membership=membership, error=refusal.message, status=422)
    messages.success(request, DECIDED_ALREADY if decided.repeat_of else DECIDED)
    return redirect("research:detail", job_id=job.pk)


@never_cache
@login_required
@require_POST
def research_cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    person = _person(request)
    job, membership = _job_for_person(person, job_id)
    _writer_check(membership)
    try:
        search_cancel(tenant_id=membership.tenant_id, user_id=person.pk, session_id=job.pk)
    except InvalidInput as refusal:
        job.refresh_from_db()
        return _detail_render(request, job=job, membership=membership, error=refusal.message, status=422)
    messages.success(request, CANCELLED)
    return redirect("research:detail", job_id=job.pk)


@never_cache
@login_required
@require_GET
def research_export(request: HttpRequest, job_id: str, fmt: str) -> HttpResponse:
    person = _person(request)
    job, membership = _job_for_person(person, job_id)
    if fmt not in EXPORTS or fmt not in EXPORT_FORMATS:
        raise Http404("No such export format.")
    try:
        result = search_result(tenant_id=membership.tenant_id, user_id=person.pk, session_id=job.pk)
    except InvalidInput as refusal:
        return _detail_render(request, job=job, membership=membership, error=refusal.message, status=422)
    extension, content_type, _ = EXPORTS[fmt]
    response = HttpResponse(export_render(result=result, fmt=fmt), content_type=content_type)
    response["Content-Disposition"] = (
        f'attachment; filename="{export_filename(job=job, extension=extension)}"'
    )
    return response


def export_filename(*, job: Job, extension: str) -> str:
    """``literature-search-<query words>-<id prefix>.<ext>``: ASCII letters, digits and dashes only,
    so no query can break out of the header's quotes or name a path."""
    query = str((job.input or {}).get("query", "")).lower()
    words = _FILENAME_UNSAFE.sub("-", query).strip("-")[:40].strip("-")
    stem = "-".join(part for part in ("literature-search", words, str(job.pk)[:8]) if part)
    return f"{stem}.{extension}"
