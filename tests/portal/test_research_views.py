"""A person's literature search pages (/research/), in process: the list (their own jobs only, in
their tenants, newest first) and its start form, one job's page with the pending checkpoint as a
form, decisions made there (recorded as the web channel), cancelling, the exports as downloads,
and every refusal: another person's or tenant's job and a malformed id are 404, a refused decision
re-renders the form with the kind's message (never a 500), and a viewer is refused (403) what the
research tools keep to mcp:write. The steps run in this process (tests/jobs/support.py) against the
tenant library. In Chromium: tests/e2e/browser/test_research_pages.py."""

from __future__ import annotations

import html
import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import Membership
from jobs.checkpoints import checkpoint_name
from jobs.models import Job, JobDecision, JobState
from portal.research_forms import STALE_FORM, UNKNOWN_BUTTON
from portal.research_views import CHOOSE_TENANT, DECIDED, DECIDED_ALREADY, NO_WRITABLE_TENANT, VIEWER_REFUSED
from research.models import LibraryPaper
from research.records import title_normalize
from research.services import search_decide, search_start
from tests.jobs.support import steps_run
from tests.support.conversation_support import table_rows, visible_text
from tests.support.factories import MembershipFactory, TenantFactory

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/research/"
PAPERS = (
    ("Attention is all you need", 2017, "10.5555/attention"),
    ("Graph attention networks", 2018, "10.5555/gat"),
    ("Neural machine translation by jointly learning to align and translate", 2015, "10.5555/align"),
)


@pytest.fixture(autouse=True)
def _library_only(settings) -> None:
    settings.GATEHOUSE = {**settings.GATEHOUSE, "RESEARCH_SOURCES": ["library"]}


@pytest.fixture
def library(owner) -> list[LibraryPaper]:
    return [
        LibraryPaper.objects.create(
            tenant=owner.tenant,
            title=title,
            title_key=title_normalize(title),
            authors=["A. Author"],
            year=year,
            doi=doi,
            abstract="We study attention in neural networks.",
        )
        for title, year, doi in PAPERS
    ]


@pytest.fixture
def browser(owner) -> Client:
    browser = Client(headers={"accept": "text/html"})
    browser.force_login(owner.user)
    return browser


def _text(page: str) -> str:
    return html.unescape(visible_text(page))


def _start(membership: Any, query: str = "attention") -> Job:
    return search_start(tenant_id=membership.tenant_id, user_id=membership.user_id, query=query)


def _at(job: Job, kind: str) -> Job:
    steps_run()
    job.refresh_from_db()
    assert (job.state, job.checkpoint_kind) == (JobState.WAITING, kind), job.error
    return job


def _decide(browser: Client, job: Job, kind: str, decision: str, **fields: object):
    """Posts the form of the page that showed ``kind``: the checkpoint's name at the job's iteration."""
    job.refresh_from_db()
    name = checkpoint_name(kind=kind, iteration=job.iteration)
    return browser.post(f"{LIST}{job.pk}/decide/", {"checkpoint": name, "decision": decision, **fields})


def _screening(owner) -> Job:
    job = _at(_start(owner), "plan")
    search_decide(
        tenant_id=owner.tenant_id,
        user_id=owner.user_id,
        session_id=job.pk,
        action="approve",
        checkpoint="plan-0",
    )
    return _at(job, "screening")


def test_signed_out_the_pages_send_to_sign_in(client: Client, owner):
    job = _start(owner)
    for path in (LIST, f"{LIST}{job.pk}/", f"{LIST}{job.pk}/export/json/"):
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_the_list_shows_her_own_searches_newest_first_with_state_and_checkpoint(browser, owner, library):
    older = _at(_start(owner, "transformers"), "plan")
    Job.objects.filter(pk=older.pk).update(created=timezone.now() - timedelta(hours=1))
    _start(owner, "graph attention")
    # Someone else's, in the same tenant, and her own in a tenant she is not in: never listed.
    stranger = MembershipFactory(tenant=owner.tenant, role="admin")
    _start(stranger, "a stranger's search")

    response = browser.get(LIST)

    assert response.status_code == 200
    rows = table_rows(response.content.decode())
    assert len(rows) == 2
    assert rows[0].startswith("graph attention Acme Test Running")
    assert rows[1].startswith("transformers Acme Test Waiting for a decision plan 0")
    assert "a stranger" not in response.content.decode()
    assert 'href="/research/"' in response.content.decode()  # the navigation links here


def test_she_starts_a_search_from_the_page_and_the_worker_drafts_its_plan(browser, owner, library):
    response = browser.post(
        LIST, {"query": "attention", "domain": "general", "max_results": "20", "tenant": owner.tenant.slug}
    )

    job = Job.objects.get(user=owner.user)
    assert response.status_code == 302
    assert response["Location"] == f"{LIST}{job.pk}/"
    assert job.input == {"query": "attention", "domain": "general", "max_results": 20}
    page = browser.get(response["Location"]).content.decode()
    assert '<meta http-equiv="refresh"' in page  # running: it reloads itself
    steps_run()
    page = browser.get(response["Location"]).content.decode()
    assert '<meta http-equiv="refresh"' not in page
    assert "Your decision: the search plan" in page
    assert 'name="sources" value="library" checked' in page


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"query": ""}, "query must be a non-empty string."),
        ({"query": "a\x00b"}, "query"),
        ({"query": "x" * 600}, "query is longer than 500 characters."),
        ({"query": "ok", "max_results": "ten"}, "max_results must be a whole number."),
        ({"query": "ok", "max_results": "9999"}, "max_results must be a whole number from 1 to 500."),
        ({"query": "ok", "domain": "astrology"}, "domain must be one of"),
    ],
)
def test_a_refused_start_re_renders_the_form_with_the_reason(browser, owner, fields, message):
    response = browser.post(LIST, {"tenant": owner.tenant.slug, **fields})

    assert response.status_code == 422
    page = response.content.decode()
    assert 'id="form-error"' in page
    assert message in _text(page)
    assert not Job.objects.exists()


def test_a_viewer_sees_her_searches_but_may_not_start_one(member):
    viewer = Client(headers={"accept": "text/html"})
    viewer.force_login(member.user)
    job = _start(member)  # e.g. started while she was a contributor

    page = viewer.get(LIST).content.decode()
    assert NO_WRITABLE_TENANT in _text(page)
    assert "Start the search" not in page
    assert str(job.pk) in page

    refused = viewer.post(LIST, {"query": "attention", "tenant": member.tenant.slug})
    assert refused.status_code == 403
    assert VIEWER_REFUSED in _text(refused.content.decode())
    assert Job.objects.count() == 1


def test_in_two_tenants_she_sees_both_and_starts_only_where_she_may_write(owner, outsider):
    # The outsider is an admin of her own tenant, and a viewer in the owner's.
    MembershipFactory(user=outsider.user, tenant=owner.tenant, role="viewer")
    browser = Client(headers={"accept": "text/html"})
    browser.force_login(outsider.user)
    mine = _start(outsider, "in my own tenant")
    viewed = search_start(tenant_id=owner.tenant_id, user_id=outsider.user_id, query="as a viewer")

    page = browser.get(LIST).content.decode()
    assert str(mine.pk) in page
    assert str(viewed.pk) in page
    assert f'<input type="hidden" name="tenant" value="{outsider.tenant.slug}">' in page
    assert browser.post(LIST, {"query": "x", "tenant": owner.tenant.slug}).status_code == 403
    assert browser.post(f"{LIST}{viewed.pk}/cancel/").status_code == 403
    assert browser.post(f"{LIST}{mine.pk}/cancel/").status_code == 302
    for slug in ("", "no-such-tenant", "a\x00b"):
        refused = browser.post(LIST, {"query": "x", "tenant": slug})
        assert refused.status_code == 422
        assert CHOOSE_TENANT in _text(refused.content.decode())
    started = browser.post(LIST, {"query": "attention", "tenant": outsider.tenant.slug})
    assert started.status_code == 302
    assert Job.objects.filter(tenant=outsider.tenant).count() == 2


def test_with_one_tenant_a_foreign_tenant_s_slug_is_refused_not_ignored(browser, owner, outsider):
    refused = browser.post(LIST, {"query": "attention", "tenant": outsider.tenant.slug})
    assert refused.status_code == 422
    assert not Job.objects.exists()


def test_a_viewer_may_not_decide_or_cancel(member):
    viewer = Client(headers={"accept": "text/html"})
    viewer.force_login(member.user)
    job = _at(_start(member), "plan")

    page = viewer.get(f"{LIST}{job.pk}/").content.decode()
    assert VIEWER_REFUSED in _text(page)
    assert "Save edits and search" not in page
    assert _decide(viewer, job, "plan", "approve").status_code == 403
    assert viewer.post(f"{LIST}{job.pk}/cancel/").status_code == 403
    job.refresh_from_db()
    assert (job.state, job.iteration) == (JobState.WAITING, 0)


def test_another_person_s_or_tenant_s_job_and_a_malformed_id_are_not_found(browser, owner, outsider):
    theirs = _start(outsider)
    colleague = _start(MembershipFactory(tenant=owner.tenant, role="admin"))
    for job_id in (
        theirs.pk,
        colleague.pk,
        "not-a-uuid",
        "0" * 500,
        "%00",
        "00000000-0000-0000-0000-000000000000",
    ):
        for path in (f"{LIST}{job_id}/", f"{LIST}{job_id}/export/json/"):
            assert browser.get(path).status_code == 404, path
        for path in (f"{LIST}{job_id}/decide/", f"{LIST}{job_id}/cancel/"):
            assert browser.post(path, {"checkpoint": "plan", "decision": "approve"}).status_code == 404
    assert {Job.objects.get(pk=theirs.pk).state, Job.objects.get(pk=colleague.pk).state} == {JobState.RUNNING}


def test_a_tenant_she_left_hides_her_job(browser, owner):
    other = TenantFactory(slug="left-test")
    membership = MembershipFactory(user=owner.user, tenant=other, role="admin")
    job = _start(membership)
    assert browser.get(f"{LIST}{job.pk}/").status_code == 200
    Membership.objects.filter(user=owner.user, tenant__slug="left-test").delete()
    assert browser.get(f"{LIST}{job.pk}/").status_code == 404
    assert str(job.pk) not in browser.get(LIST).content.decode()


def test_a_full_search_decided_on_the_page_edits_the_plan_keeps_a_subset_and_exports(browser, owner, library):
    job = _at(_start(owner), "plan")

    edited = _decide(
        browser,
        job,
        "plan",
        "edit",
        terms="attention\nalign",
        year_from="2015",
        year_to="",
        sources="library",
        max_results="50",
        note="Wider, please.",
    )
    assert edited.status_code == 302
    job = _at(job, "screening")
    assert job.context["plan"]["terms"] == ["attention", "align"]
    assert job.context["plan"]["year_from"] == 2015
    candidates = {c["title"]: c["id"] for c in (job.checkpoint or {})["candidates"]}
    assert "Attention is all you need" in candidates
    page = browser.get(f"{LIST}{job.pk}/").content.decode()
    assert "Approve all" in page
    assert "Reject and refine" in page

    keep = [candidates["Attention is all you need"], candidates["Graph attention networks"]]
    assert _decide(browser, job, "screening", "keep", keep=keep).status_code == 302
    job.refresh_from_db()
    assert job.checkpoint_kind == "final"
    assert [p["title"] for p in (job.checkpoint or {})["papers"]] == [
        "Attention is all you need",
        "Graph attention networks",
    ]

    # A paper keeps the id it had among the candidates (research.paper_ids).
    assert (
        _decide(browser, job, "final", "keep", keep=[candidates["Graph attention networks"]]).status_code
        == 302
    )
    job.refresh_from_db()
    assert [p["title"] for p in (job.checkpoint or {})["papers"]] == ["Graph attention networks"]
    assert _decide(browser, job, "final", "approve", note="Done").status_code == 302
    job.refresh_from_db()
    assert job.state == JobState.COMPLETE
    assert (job.result or {})["paper_count"] == 1

    decisions = list(JobDecision.objects.filter(job=job).order_by("created", "id"))
    assert [(d.checkpoint_kind, d.action, d.channel) for d in decisions] == [
        ("plan", "edit", "web"),
        ("screening", "edit", "web"),
        ("final", "edit", "web"),
        ("final", "approve", "web"),
    ]
    assert decisions[0].data == {
        "terms": ["attention", "align"],
        "year_from": 2015,
        "year_to": None,
        "sources": ["library"],
        "max_results": 50,
    }
    assert decisions[0].note == "Wider, please."
    page = browser.get(f"{LIST}{job.pk}/").content.decode()
    assert "Download BibTeX" in page
    history = visible_text(page)
    assert "Wider, please." in history
    assert "owner" in history
    assert "Cancel this search" not in page

    bibtex = browser.get(f"{LIST}{job.pk}/export/bibtex/")
    assert bibtex.status_code == 200
    assert bibtex["Content-Type"] == "application/x-bibtex; charset=utf-8"
    assert (
        bibtex["Content-Disposition"]
        == f'attachment; filename="literature-search-attention-{str(job.pk)[:8]}.bib"'
    )
    assert "Graph attention networks" in bibtex.content.decode()
    exported = browser.get(f"{LIST}{job.pk}/export/json/")
    assert exported["Content-Type"] == "application/json"
    assert exported["Content-Disposition"].endswith('.json"')
    assert "Graph attention networks" in json.dumps(json.loads(exported.content))
    markdown = browser.get(f"{LIST}{job.pk}/export/markdown/")
    assert markdown["Content-Type"] == "text/markdown; charset=utf-8"
    assert "Graph attention networks" in markdown.content.decode()
    assert browser.get(f"{LIST}{job.pk}/export/pdf/").status_code == 404


def test_dois_added_at_screening_are_looked_up_in_the_worker(browser, owner, library):
    LibraryPaper.objects.create(
        tenant=owner.tenant,
        title="Unrelated but wanted",
        title_key="unrelated but wanted",
        doi="10.5555/wanted",
    )
    job = _screening(owner)
    first = job.context["candidates"][0]["title"]
    kept = _decide(
        browser,
        job,
        "screening",
        "keep",
        keep="p1",
        add_dois="https://doi.org/10.5555/WANTED, 10.5555/nowhere",
    )
    assert kept.status_code == 302
    job = _at(job, "final")
    titles = [p["title"] for p in (job.checkpoint or {})["papers"]]
    assert titles == [first, "Unrelated but wanted", "DOI 10.5555/nowhere"]
    decision = JobDecision.objects.get(job=job, checkpoint_kind="screening")
    assert decision.data == {
        "keep": ["p1"],
        "add_dois": ["https://doi.org/10.5555/WANTED", "10.5555/nowhere"],
    }


def test_approve_all_and_the_plan_s_approve_and_reject(browser, owner, library):
    job = _screening(owner)
    assert _decide(browser, job, "screening", "approve").status_code == 302
    job.refresh_from_db()
    assert job.checkpoint_kind == "final"
    assert len((job.checkpoint or {})["papers"]) == len(job.context["candidates"])
    assert _decide(browser, job, "final", "back").status_code == 302
    job.refresh_from_db()
    assert job.checkpoint_kind == "screening"

    other = _at(_start(owner, "nothing"), "plan")
    assert _decide(browser, other, "plan", "reject", note="Not now").status_code == 302
    other.refresh_from_db()
    assert other.state == JobState.CANCELLED


def test_approve_all_posted_four_times_approves_the_screening_once_and_never_the_final(
    browser, owner, library
):
    job = _screening(owner)
    form = {"checkpoint": "screening-1", "decision": "approve"}
    answers = []
    for _ in range(4):  # the worker moves on between the posts, as it does between impatient clicks
        answers.append(browser.post(f"{LIST}{job.pk}/decide/", form, follow=True))
        steps_run()
    assert [answer.status_code for answer in answers] == [200] * 4
    assert DECIDED in _text(answers[0].content.decode())
    assert all(DECIDED_ALREADY in _text(answer.content.decode()) for answer in answers[1:])
    job.refresh_from_db()
    assert (job.state, job.checkpoint_kind, job.iteration) == (JobState.WAITING, "final", 2)
    assert [(d.checkpoint_kind, d.action) for d in job.decisions.all()] == [
        ("plan", "approve"),
        ("screening", "approve"),
    ]
    # A different decision for the screening, from a page left open, is refused and says where the job is.
    stale = browser.post(f"{LIST}{job.pk}/decide/", {"checkpoint": "screening-1", "decision": "keep"})
    assert stale.status_code == 422
    assert (
        "Checkpoint 'screening-1' was already decided (approve); the job now waits at checkpoint 'final-2'."
        in (_text(stale.content.decode()))
    )


def test_reject_and_refine_searches_again_with_the_new_terms(browser, owner, library):
    job = _screening(owner)
    assert _decide(browser, job, "screening", "refine", terms="align", year_from="2014").status_code == 302
    job = _at(job, "screening")
    assert job.context["plan"]["terms"] == ["align"]
    assert job.context["plan"]["year_from"] == 2014
    assert job.iteration == 2


def test_an_export_of_an_incomplete_search_is_refused_on_its_page(browser, owner):
    job = _start(owner)
    response = browser.get(f"{LIST}{job.pk}/export/bibtex/")
    assert response.status_code == 422
    assert "not complete" in response.content.decode()


@pytest.mark.parametrize(
    ("kind_fields", "message"),
    [
        ({"decision": "edit", "terms": "", "sources": "library"}, "terms must be a list of 1 to 20 strings."),
        ({"decision": "edit", "terms": "x"}, "sources must be a non-empty list"),
        (
            {"decision": "edit", "terms": "x", "sources": "library", "year_from": "20x"},
            "year_from must be a whole number.",
        ),
        (
            {"decision": "edit", "terms": "x", "sources": "library", "year_from": "2020", "year_to": "2010"},
            "year_from is after year_to.",
        ),
        (
            {"decision": "edit", "terms": "x", "sources": "library", "year_from": "1066"},
            "year_from must be a whole number from 1600",
        ),
        ({"decision": "edit", "terms": "x", "sources": "nowhere"}, "Unknown source(s) nowhere"),
        ({"decision": "edit", "terms": "a\x00b", "sources": "library"}, "contains a NUL character"),
        ({"decision": "approve", "note": "a\x00b"}, "note"),
        ({"decision": "approve", "note": "n" * 2001}, "note is longer than 2000 characters."),
        ({"decision": "explode"}, UNKNOWN_BUTTON),
        (
            {"decision": "approve", "checkpoint": "final-0"},
            "Checkpoint 'final-0' is not the one pending: the job waits at checkpoint 'plan-0'",
        ),
        ({"decision": "approve", "checkpoint": "plan"}, STALE_FORM),
    ],
)
def test_a_refused_plan_decision_re_renders_the_form_with_the_kind_s_message(
    browser, owner, kind_fields, message
):
    job = _at(_start(owner), "plan")
    fields = {"checkpoint": "plan-0", **kind_fields}
    response = browser.post(f"{LIST}{job.pk}/decide/", fields)

    assert response.status_code == 422
    page = response.content.decode()
    assert message in _text(page)
    assert "Save edits and search" in page  # the form is there again
    job.refresh_from_db()
    assert (job.state, job.checkpoint_kind, job.iteration) == (JobState.WAITING, "plan", 0)
    assert not JobDecision.objects.exists()


def test_invalid_utf_8_in_a_form_is_read_as_replacement_characters_never_a_500(browser, owner):
    # A browser cannot send a lone surrogate; its nearest is bytes that are not UTF-8 (a lone
    # surrogate's own encoding, ED A0 80, among them), which Django reads as U+FFFD.
    job = _at(_start(owner), "plan")
    raw = "application/x-www-form-urlencoded"
    started = browser.post(LIST, f"query=ok%ED%A0%80%FF&tenant={owner.tenant.slug}", content_type=raw)
    assert started.status_code == 302
    assert Job.objects.exclude(pk=job.pk).get().input["query"].startswith("ok\ufffd")
    decided = browser.post(
        f"{LIST}{job.pk}/decide/",
        "checkpoint=plan-0&decision=edit&terms=a%ED%A0%80&sources=library&max_results=%FF&note=%C0",
        content_type=raw,
    )
    assert decided.status_code == 422
    assert "max_results must be a whole number." in decided.content.decode()
    stale = browser.post(f"{LIST}{job.pk}/decide/", "checkpoint=%ED%A0%80&decision=approve", content_type=raw)
    assert stale.status_code == 422
    assert not JobDecision.objects.exists()


def test_a_refused_edit_keeps_what_she_typed(browser, owner):
    job = _at(_start(owner), "plan")
    response = _decide(browser, job, "plan", "edit", terms="first\nsecond", sources="", note="my\x00note")
    page = response.content.decode()
    assert response.status_code == 422
    assert "first\nsecond</textarea>" in page
    assert "\x00" not in page


def test_screening_refusals_re_render_the_form(browser, owner, library):
    job = _screening(owner)
    for fields, message in (
        (
            {"decision": "keep", "keep": "p99"},
            "keep names no paper shown at the screening checkpoint: 'p99'.",
        ),
        ({"decision": "keep", "add_dois": "not-a-doi"}, "Not a DOI"),
        ({"decision": "refine", "year_to": "abc"}, "year_to must be a whole number."),
    ):
        response = _decide(browser, job, "screening", **fields)
        assert response.status_code == 422, fields
        assert message in _text(response.content.decode())
        assert "Keep selected" in response.content.decode()
    job.refresh_from_db()
    assert (job.checkpoint_kind, job.iteration) == ("screening", 1)


def test_a_decision_while_the_job_runs_or_after_it_ended_says_why(browser, owner):
    job = _start(owner)
    response = _decide(browser, job, "plan", "approve")
    assert response.status_code == 422
    assert "No pending checkpoint: the job is running" in response.content.decode()

    assert browser.post(f"{LIST}{job.pk}/cancel/").status_code == 302
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    steps_run()  # its step finds the job cancelled and does nothing
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    page = browser.get(f"{LIST}{job.pk}/").content.decode()
    assert "Cancel this search" not in page
    assert '<meta http-equiv="refresh"' not in page

    again = browser.post(f"{LIST}{job.pk}/cancel/")
    assert again.status_code == 422
    assert "cancelled" in again.content.decode()
    assert _decide(browser, job, "plan", "approve").status_code == 422


def test_a_failed_search_shows_its_error(browser, owner):
    job = _start(owner)
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED, error="<b>Source exploded</b>")
    page = browser.get(f"{LIST}{job.pk}/").content.decode()
    assert "The search failed: &lt;b&gt;Source exploded&lt;/b&gt;" in page


def test_hostile_text_in_a_query_and_a_paper_is_shown_escaped(browser, owner):
    hostile = "<script>alert(1)</script>"
    LibraryPaper.objects.create(
        tenant=owner.tenant, title=f"{hostile} attention", title_key=title_normalize(f"{hostile} attention")
    )
    job = _screening(owner)
    Job.objects.filter(pk=job.pk).update(input={**job.input, "query": hostile})
    for path in (LIST, f"{LIST}{job.pk}/"):
        page = browser.get(path).content.decode()
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_export_filename_never_carries_the_query_s_punctuation(browser, owner):
    job = _start(owner, 'a "quoted"\\ /path ünïcode')
    Job.objects.filter(pk=job.pk).update(
        state=JobState.COMPLETE, result={"query": "q", "papers": [], "paper_count": 0}
    )
    response = browser.get(f"{LIST}{job.pk}/export/markdown/")
    assert response["Content-Disposition"] == (
        f'attachment; filename="literature-search-a-quoted-path-n-code-{str(job.pk)[:8]}.md"'
    )


def test_a_post_without_the_csrf_token_is_refused(owner):
    job = _start(owner)
    browser = Client(enforce_csrf_checks=True, headers={"accept": "text/html"})
    browser.force_login(owner.user)
    assert browser.post(LIST, {"query": "attention", "tenant": owner.tenant.slug}).status_code == 403
    assert browser.post(f"{LIST}{job.pk}/cancel/").status_code == 403
    assert (
        browser.post(f"{LIST}{job.pk}/decide/", {"checkpoint": "plan", "decision": "approve"}).status_code
        == 403
    )
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert Job.objects.count() == 1
