"""A literature search steered in real headless Chromium, each page saved as a screenshot for CI:
a person signs in, starts a search on /research/, approves the plan, keeps a subset at screening,
approves the final selection and downloads the BibTeX. The steps run in a real ``jobs_worker``
beside the Daphne server, against the tenant's own library (the main server offers only
``library``, so nothing reaches the network); the pages reload themselves while it works."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from accounts.models import Membership, Role
from research.models import LibraryPaper
from research.records import title_normalize
from tests.e2e.browser.pages import policy_violations, sign_in_by_keyboard
from tests.e2e.conftest import person_of
from tests.support.factories import MembershipFactory

pytestmark = pytest.mark.django_db

PAPERS = (
    ("Attention is all you need", 2017, "10.5555/attention", "Vaswani, Ashish"),
    ("Graph attention networks", 2018, "10.5555/gat", "Veličković, Petar"),
    ("Visual attention in deep networks", 2015, "10.5555/visual", "Doe, Jane"),
)
# The worker polls for steps and the page reloads itself every few seconds: time enough for both.
STEP_TIMEOUT_MS = 60_000


@pytest.fixture
def researcher(committed) -> Membership:
    """An admin of a tenant of the test's own, whose library holds three papers on attention."""
    membership = committed(MembershipFactory, role=Role.ADMIN)
    for title, year, doi, author in PAPERS:
        committed(
            LibraryPaper.objects.create,
            tenant=membership.tenant,
            title=title,
            title_key=title_normalize(title),
            authors=[author],
            year=year,
            doi=doi,
            venue="Proceedings",
            abstract=f"{title}: a study of attention.",
        )
    return membership


async def test_a_search_started_in_the_browser_is_steered_to_a_bibtex_download(tab, jobs_worker, researcher):
    person = person_of(researcher)
    page = tab.page
    violations = policy_violations(page)
    await page.goto("/accounts/login/?next=/research/")
    await sign_in_by_keyboard(page, username=person.username, password=person.password)
    await expect(page.get_by_role("heading", level=1, name="Literature searches")).to_be_visible()
    nav_link = page.get_by_role("navigation", name="Your account").get_by_role(
        "link", name="Literature searches"
    )
    await expect(nav_link).to_have_attribute("aria-current", "page")
    await expect(page.locator("#jobs")).to_have_text("You have no literature search yet.")

    await page.get_by_label("Search for").fill("attention")
    await page.get_by_label("At most").fill("20")
    await page.get_by_role("button", name="Start the search").click()

    # The worker drafts the plan; the page reloads itself until it is there.
    plan = page.get_by_role("heading", level=2, name="Your decision: the search plan")
    await expect(plan).to_be_visible(timeout=STEP_TIMEOUT_MS)
    await expect(page.get_by_label("Search terms, one per line")).to_have_value("attention")
    await expect(page.get_by_label("library")).to_be_checked()
    await tab.screenshot("research-plan")
    await page.get_by_label("Note").fill("Looks right.")
    await page.get_by_role("button", name="Approve", exact=True).click()

    screening = page.get_by_role("heading", level=2, name="Your decision: screening")
    await expect(screening).to_be_visible(timeout=STEP_TIMEOUT_MS)
    await expect(page.locator("#checkpoint-summary")).to_have_text("3 candidate paper(s) found.")
    await tab.screenshot("research-screening")
    await page.get_by_label("Keep Attention is all you need").check()
    await page.get_by_label("Keep Graph attention networks").check()
    await page.get_by_role("button", name="Keep selected").click()

    final = page.get_by_role("heading", level=2, name="Your decision: the final selection")
    await expect(final).to_be_visible(timeout=STEP_TIMEOUT_MS)
    papers = page.locator("#papers tbody tr")
    await expect(papers).to_have_count(2)
    await expect(page.get_by_label("Keep Attention is all you need")).to_be_checked()
    await tab.screenshot("research-final")
    await page.get_by_role("button", name="Approve", exact=True).click()

    await expect(page.locator("#job-state")).to_have_text("Complete", timeout=STEP_TIMEOUT_MS)
    await expect(page.locator("#result-summary")).to_have_text("2 paper(s) selected for 'attention'.")
    history = page.locator("#decisions tbody tr")
    await expect(history).to_have_count(3)
    await expect(history.nth(0)).to_contain_text("Looks right.")
    await expect(history.nth(0)).to_contain_text("web")
    await tab.screenshot("research-complete")

    async with page.expect_download() as download_info:
        await page.get_by_role("link", name="Download BibTeX").click()
    download = await download_info.value
    assert download.suggested_filename.startswith("literature-search-attention-")
    assert download.suggested_filename.endswith(".bib")
    path = await download.path()
    bibtex = path.read_text(encoding="utf-8")
    assert "Attention is all you need" in bibtex
    assert "Graph attention networks" in bibtex
    assert "Visual attention in deep networks" not in bibtex
    assert violations == []
