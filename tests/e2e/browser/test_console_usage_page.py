"""The console's usage and audit section in real headless Chromium: alice (acme's admin) filters
acme's audit rows by tool and outcome, the chart is drawn under the strict CSP, and the CSV she
downloads holds exactly the rows the page shows. A screenshot for CI."""

from __future__ import annotations

import csv
import io
import secrets

import pytest
from playwright.async_api import expect

from accounts.models import Membership
from core.models import AuditEvent, AuditOutcome
from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD
from tests.support.factories import AuditEventFactory

pytestmark = pytest.mark.django_db

USAGE_PATH = "/console/acme/usage/"


def _alices_calls(*, target: str) -> None:
    """Three calls that succeeded and two that failed, by alice in acme, of a tool of this test's own."""
    alice = Membership.objects.select_related("user", "tenant").get(
        user__username="alice", tenant__slug="acme"
    )
    for outcome in [AuditOutcome.OK] * 3 + [AuditOutcome.ERROR] * 2:
        AuditEventFactory.create(membership=alice, target=target, outcome=outcome)


def _forget(*, target: str) -> None:
    AuditEvent.objects.filter(target=target).delete()


async def test_alice_filters_the_audit_rows_and_the_csv_holds_exactly_those_rows(tab, committed):
    target = f"usage-e2e-{secrets.token_hex(4)}"
    committed(_alices_calls, target=target)
    try:
        page = tab.page
        violations = policy_violations(page)
        await page.goto(f"/accounts/login/?next={USAGE_PATH}")
        await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
        await expect(page.get_by_role("heading", level=2, name="Usage and audit")).to_be_visible()

        await page.get_by_label("Tool or target").fill(target)
        await page.get_by_label("Outcome").select_option("error")
        await page.get_by_role("button", name="Filter").click()
        rows = page.locator("#table-rows tbody tr")
        await expect(rows).to_have_count(2)
        await expect(rows.first).to_contain_text(target)
        await page.wait_for_function("() => window.Chart && Chart.getChart('chart-days')")
        shown = await page.locator("#table-rows tbody time").evaluate_all(
            "times => times.map(t => t.getAttribute('datetime'))"
        )
        await fits_the_viewport(page)
        await tab.screenshot("console-usage")

        async with page.expect_download() as download_info:
            await page.get_by_role("link", name="Download these rows as CSV").click()
        download = await download_info.value
        assert download.suggested_filename.startswith("audit-acme-")
        path = await download.path()
        exported = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
        assert [row["created"] for row in exported] == shown
        assert {(row["username"], row["target"], row["outcome"]) for row in exported} == {
            ("alice", target, "error")
        }
        assert violations == []
    finally:
        committed(_forget, target=target)
