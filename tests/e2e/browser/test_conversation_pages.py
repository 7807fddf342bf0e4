"""A person's conversation pages in real headless Chromium, each saved as a screenshot for CI: the
list (their own conversations only, per tenant, newest first, searched by keyboard) and one
conversation with a command's turn (its table of rows) and an agent's turn (its trace), reached
from the list by keyboard alone. The rows are written with the ORM and committed, so the Daphne
server reads them as it would the workflow tools' own."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone
from playwright.async_api import Page, expect

from accounts.models import Tenant, User
from conversations.models import Conversation, Turn, TurnKind
from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard, tab_to
from tests.e2e.harness import Person
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

HOSTILE_TOPIC = "<img src=x onerror=alert(1)> Pricing"


@pytest.fixture
def gina(committed) -> tuple[Person, User]:
    """A fresh person in acme and globex, so her pages show only this test's rows."""
    user = committed(UserFactory, username=f"gina-{secrets.token_hex(3)}")
    committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="acme"), role="admin")
    committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="globex"), role="viewer")
    return Person(user.username, password=DEFAULT_PASSWORD, tenant="acme"), user


def _conversation(committed, *, user: User, tenant: str, minutes_ago: int, **fields: Any) -> Conversation:
    return committed(
        Conversation.objects.create,
        user=user,
        tenant=Tenant.objects.get(slug=tenant),
        created=timezone.now() - timedelta(minutes=minutes_ago + 5),
        updated=timezone.now() - timedelta(minutes=minutes_ago),
        **fields,
    )


def _turn(committed, conversation: Conversation, **fields: Any) -> Turn:
    return committed(Turn.objects.create, conversation=conversation, **fields)


@pytest.fixture
def conversations(committed, gina) -> dict[str, Conversation]:
    _, user = gina
    made = {
        "sales": _conversation(
            committed,
            user=user,
            tenant="acme",
            minutes_ago=2,
            topic="Top customers in France",
            summary="Listed the French customers, then asked the agent who bought the most.",
        ),
        "untitled": _conversation(committed, user=user, tenant="globex", minutes_ago=20),
        "hostile": _conversation(committed, user=user, tenant="acme", minutes_ago=90, topic=HOSTILE_TOPIC),
    }
    _turn(
        committed,
        made["sales"],
        kind=TurnKind.COMMAND,
        request="sales/ListCustomers country=FR",
        created=timezone.now() - timedelta(minutes=5),
        success=True,
        duration_ms=184.0,
        output={
            "success": True,
            "workflow_name": "Sales analysis",
            "context": "sales",
            "command_name": "sales/ListCustomers",
            "command_parameters": {"country": "FR"},
            "command_responses": [
                {
                    "response": "3 customers in France.",
                    "artifacts": {
                        "columns": ["customer", "city", "orders"],
                        "rows": [["Ana Lima", "Paris", 12], ["Bo Chen", "Lyon", 7], ["Cy Roy", "Lille", 3]],
                    },
                    "next_actions": ["sales/ShowCustomer"],
                    "recommendations": [],
                }
            ],
        },
        feedback_score=1.0,
        feedback_text="Exactly the list I needed.",
        feedback_at=timezone.now(),
    )
    start = int((timezone.now() - timedelta(minutes=3)).timestamp() * 1000)
    trace = {
        "raw_command": "sales/TopCustomers limit=1",
        "command_name": "sales/TopCustomers",
        "parameters": {"limit": 1},
    }
    _turn(
        committed,
        made["sales"],
        kind=TurnKind.AGENT,
        request="Who bought the most?",
        created=timezone.now() - timedelta(minutes=3),
        success=True,
        duration_ms=2350.0,
        output={
            "success": True,
            "workflow_name": "Sales analysis",
            "context": "sales",
            "command_name": "",
            "command_parameters": {},
            "command_responses": [{"response": "Ana Lima bought the most: 12 orders.", "artifacts": {}}],
        },
        traces=[
            trace
            | {"timestamp": start, "direction": "agent_to_workflow", "response_text": "", "success": True},
            trace
            | {
                "timestamp": start + 420,
                "direction": "workflow_to_agent",
                "response_text": "Ana Lima, 12 orders",
                "success": True,
            },
        ],
    )
    # Someone else's conversation, in the same tenant: never on her pages.
    stranger = committed(UserFactory, username=f"stranger-{secrets.token_hex(3)}")
    committed(MembershipFactory, user=stranger, tenant=Tenant.objects.get(slug="acme"))
    _conversation(committed, user=stranger, tenant="acme", minutes_ago=1, topic="A stranger's conversation")
    return made


async def _sign_in(page: Page, person: Person, *, next_path: str) -> None:
    await page.goto(f"/accounts/login/?next={next_path}")
    await sign_in_by_keyboard(page, username=person.username, password=person.password)
    await expect(page.get_by_role("button", name=f"Sign out {person.username}")).to_be_visible()


async def test_the_list_shows_her_conversations_newest_first_and_is_searched_by_keyboard(
    tab, gina, conversations
):
    person, _ = gina
    page = tab.page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    violations = policy_violations(page)
    await _sign_in(page, person, next_path="/")

    nav_link = page.get_by_role("navigation", name="Your account").get_by_role("link", name="Conversations")
    await tab_to(page, nav_link)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1, name="Conversations")).to_be_visible()
    await expect(nav_link).to_have_attribute("aria-current", "page")

    table = page.locator("table#conversations")
    headers = await table.get_by_role("columnheader").all_inner_texts()
    assert headers == ["Conversation", "Tenant", "Updated", "Turns"]
    rows = table.locator("tbody tr")
    await expect(rows).to_have_count(3)
    await expect(rows.nth(0)).to_contain_text("Top customers in France")
    await expect(rows.nth(0)).to_contain_text("Listed the French customers")
    await expect(rows.nth(0).locator("td").nth(0)).to_have_text("Acme")
    await expect(rows.nth(0).locator("td").nth(2)).to_have_text("2")
    untitled = str(conversations["untitled"].pk)[:8]
    await expect(rows.nth(1)).to_contain_text(f"Untitled conversation {untitled}")
    await expect(rows.nth(1).locator("td").nth(0)).to_have_text("Globex")
    await expect(rows.nth(2).get_by_role("link")).to_have_text(HOSTILE_TOPIC)
    await expect(table.locator("img")).to_have_count(0)
    await expect(page.get_by_text("A stranger's conversation")).to_have_count(0)
    await fits_the_viewport(page)
    await tab.screenshot("conversations")

    # The search box, the tenant choice and the button come in order after the navigation.
    search = page.get_by_label("Topic contains")
    await tab_to(page, search)
    await page.keyboard.type("FRANCE")
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("Tenant")).to_be_focused()
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("button", name="Search")).to_be_focused()
    await page.keyboard.press("Enter")

    await expect(rows).to_have_count(1)
    await expect(rows.nth(0)).to_contain_text("Top customers in France")
    await expect(table.locator("caption")).to_have_text("1 conversation whose topic contains “FRANCE”")
    await expect(page.get_by_label("Topic contains")).to_have_value("FRANCE")
    await tab.screenshot("conversations-search")

    await page.goto("/conversations/?tenant=globex")
    await expect(rows).to_have_count(1)
    await expect(rows.nth(0)).to_contain_text("Untitled conversation")
    await expect(page.get_by_label("Tenant")).to_have_value("globex")
    assert dialogs == []
    assert violations == []


async def test_a_conversation_shows_its_command_turn_and_its_agent_turn_with_the_trace(
    tab, gina, conversations
):
    person, _ = gina
    page = tab.page
    violations = policy_violations(page)
    await _sign_in(page, person, next_path="/conversations/")

    # From the list to the conversation by keyboard alone.
    link = page.get_by_role("link", name="Top customers in France")
    await tab_to(page, link)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1, name="Top customers in France")).to_be_visible()

    turns = page.get_by_role("heading", level=2)
    await expect(turns).to_have_count(2)
    await expect(turns.nth(0)).to_contain_text("Turn 1: Command")
    await expect(turns.nth(0)).to_contain_text("Succeeded")
    await expect(turns.nth(0)).to_contain_text("took 184 ms")
    await expect(turns.nth(1)).to_contain_text("Turn 2: Agent")
    await expect(turns.nth(1)).to_contain_text("took 2.4 s")

    first = page.locator("#turn-1")
    await expect(first.locator(".request")).to_have_text("sales/ListCustomers country=FR")
    await expect(first.locator("ol.commands")).to_contain_text("sales/ListCustomers")
    await expect(first.locator("ol.commands pre")).to_contain_text('"country": "FR"')
    await expect(first.locator(".response-text").first).to_have_text("3 customers in France.")
    data = first.locator("table.data")
    assert await data.get_by_role("columnheader").all_inner_texts() == ["customer", "city", "orders"]
    await expect(data.locator("tbody tr")).to_have_count(3)
    await expect(data.locator("tbody tr").nth(0)).to_contain_text("Ana Lima")
    await expect(first.locator(".feedback")).to_contain_text("Score 1")
    await expect(first).to_contain_text("Exactly the list I needed.")

    second = page.locator("#turn-2")
    await expect(second.locator("ol.commands")).to_contain_text("sales/TopCustomers")
    await expect(second.get_by_role("heading", level=3, name="Trace")).to_be_visible()
    events = second.locator("table.traces tbody tr")
    await expect(events).to_have_count(2)
    await expect(events.nth(0)).to_contain_text("Agent → workflow")
    await expect(events.nth(1)).to_contain_text("Workflow → agent")
    await expect(events.nth(1)).to_contain_text("Ana Lima, 12 orders")
    await expect(second).to_contain_text("No feedback was given.")
    # The page's own styles (in the nonce'd style element) apply.
    await expect(page.locator("#turn-1 .badge.ok")).to_have_css("background-color", "rgb(230, 244, 234)")
    await fits_the_viewport(page)
    await tab.screenshot("conversation")
    assert violations == []

    # Back to the list by keyboard too.
    back = page.get_by_role("link", name="All conversations")
    await tab_to(page, back)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1, name="Conversations")).to_be_visible()


async def test_another_person_s_conversation_is_not_found(tab, gina, conversations):
    person, _ = gina
    page = tab.page
    await _sign_in(page, person, next_path="/conversations/")
    stranger_s = await _stranger_conversation_id(person.username)

    response = await page.goto(f"/conversations/{stranger_s}/")

    assert response is not None
    assert response.status == 404
    await expect(page.get_by_text("No such conversation.")).to_be_visible()
    await expect(page.get_by_text("A stranger's conversation")).to_have_count(0)
    await tab.screenshot("conversation-not-found")


@sync_to_async
def _stranger_conversation_id(username: str) -> str:
    return str(
        Conversation.objects.exclude(user__username=username).get(topic="A stranger's conversation").pk
    )


LONG_WORD = "W" * 200


@pytest.fixture
def long_text(committed, gina) -> Conversation:
    """A conversation whose every field is one long word, and whose table is wide and long."""
    _, user = gina
    conversation = _conversation(
        committed, user=user, tenant="acme", minutes_ago=1, topic=LONG_WORD, summary="S" * 4000
    )
    columns = [f"column_{index}_{LONG_WORD[:20]}" for index in range(20)]
    _turn(
        committed,
        conversation,
        kind=TurnKind.COMMAND,
        request="R" * 8000,
        success=True,
        output={
            "command_name": "ctx/" + LONG_WORD,
            "command_parameters": {LONG_WORD: LONG_WORD},
            "command_responses": [
                {"response": LONG_WORD, "artifacts": {"columns": columns, "rows": [[LONG_WORD] * 20] * 60}}
            ],
        },
        traces=[{"direction": "agent_to_workflow", "command_name": LONG_WORD, "response_text": LONG_WORD}],
    )
    return conversation


async def test_long_unbroken_text_wraps_and_wide_tables_scroll_inside_the_page(tab, gina, long_text):
    person, _ = gina
    page = tab.page
    await _sign_in(page, person, next_path="/conversations/")
    await expect(page.locator("table#conversations tbody tr")).to_have_count(1)
    await fits_the_viewport(page)
    await tab.screenshot("conversations-long-text")

    await page.get_by_role("link", name=LONG_WORD[:119] + "…").click()
    table = page.locator("#turn-1 table.data").first
    await expect(table.locator("tbody tr")).to_have_count(50)
    await expect(table.locator("caption")).to_have_text("The first 50 of 60 rows")
    await fits_the_viewport(page)
    await tab.screenshot("conversation-long-text")
