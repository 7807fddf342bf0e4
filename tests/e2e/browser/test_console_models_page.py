"""The console's models and budgets page in real headless Chromium: alice (acme's admin) sets a
daily token budget for the whole tenant and sees it listed with what acme has spent against it,
at 1280 px and on a phone, each saved as a screenshot for CI."""

from __future__ import annotations

from decimal import Decimal

import pytest
from playwright.async_api import expect

from accounts.models import Membership
from language_models.models import BudgetPeriod
from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD
from tests.support.llm_admin_support import LlmUsageFactory

pytestmark = pytest.mark.django_db

SPENT_TOKENS = 1234
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def acme_spent(committed) -> None:
    """A call alice made today: 1,234 tokens against acme's budgets. The module's demo restore
    removes it (and the budget the page makes) after the module."""
    alice = Membership.objects.get(user__username="alice", tenant__slug="acme")
    committed(LlmUsageFactory, membership=alice, total_tokens=SPENT_TOKENS, cost=Decimal("0.01"))


@pytest.mark.usefixtures("acme_spent")
async def test_alice_sets_a_daily_token_budget_and_sees_spend_against_it(wide_tab, server):
    page = wide_tab.page
    violations = policy_violations(page)
    await page.goto("/accounts/login/?next=/console/acme/models/")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await expect(page.get_by_role("heading", name="Models and budgets")).to_be_visible()
    await expect(page.locator("#budgets")).to_contain_text("No budgets")

    budget_form = page.locator("#budget-form")
    await budget_form.get_by_label("Period").select_option(BudgetPeriod.DAY.value)
    await budget_form.get_by_label("Token limit").fill("5000")
    await budget_form.get_by_role("button", name="Save the budget").click()

    await expect(page.get_by_role("status")).to_have_text("The budget is saved.")
    row = page.locator("#budgets tbody tr")
    await expect(row).to_have_count(1)
    await expect(row).to_contain_text("The whole tenant")
    await expect(row).to_contain_text("Per day (UTC)")
    await expect(row).to_contain_text(f"{SPENT_TOKENS} of 5000 used")
    assert violations == []
    await wide_tab.screenshot("console-models")

    await page.set_viewport_size(PHONE)
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-models-phone")
