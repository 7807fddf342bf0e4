"""A person's conversation pages, in process: the list (only their own, only in tenants they are an
active member of, newest updated first, searchable by topic, per tenant, a page at a time) and one
conversation with its turns in full; everything else (another person's, another tenant's, a
malformed id, a tenant they left) answered "not found" alike, and hostile input never a 500.

In Chromium: tests/e2e/browser/test_conversation_pages.py."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import User
from conversations.models import Conversation, Turn, TurnKind
from portal.conversation_display import (
    JSON_MAX_CHARS,
    TABLE_MAX_ROWS,
    TRACES_MAX,
    bounded_json,
    turn_shown,
)
from portal.conversation_selectors import (
    NO_CONVERSATION,
    NO_TENANT,
    SEARCH_MAX_CHARS,
    conversations_for_person,
)
from portal.conversation_views import PAGE_SIZE
from tests.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

LIST = "/conversations/"
HTML = {"HTTP_ACCEPT": "text/html"}


@pytest.fixture
def browser(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


def _conversation(
    *, user: User, tenant: Any, topic: str = "", minutes_ago: int = 0, **fields: Any
) -> Conversation:
    moment = timezone.now() - timedelta(minutes=minutes_ago)
    return Conversation.objects.create(user=user, tenant=tenant, topic=topic, updated=moment, **fields)


def _turn(conversation: Conversation, **fields: Any) -> Turn:
    defaults: dict[str, Any] = {"kind": TurnKind.COMMAND, "request": "list customers", "success": True}
    return Turn.objects.create(conversation=conversation, **(defaults | fields))


def _visible(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [_visible(row).strip() for row in body.split("</tr>")[:-1]]


def _command_output(**fields: Any) -> dict[str, Any]:
    return {
        "success": True,
        "workflow_name": "Sales",
        "context": "sales",
        "command_name": "sales/ListCustomers",
        "command_parameters": {"country": "FR"},
        "command_responses": [
            {
                "response": "2 customers.",
                "artifacts": {"columns": ["name", "country"], "rows": [["Ana", "FR"], ["Bo", "FR"]]},
                "next_actions": ["sales/ShowCustomer"],
                "recommendations": ["Filter by city next."],
            }
        ],
    } | fields


# --- the list ---------------------------------------------------------------------------------------


def test_signed_out_the_pages_send_to_sign_in(client: Client, owner):
    conversation = _conversation(user=owner.user, tenant=owner.tenant, topic="Q3")

    for path in (LIST, f"{LIST}{conversation.pk}/"):
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_it_lists_the_person_s_conversations_newest_updated_first_with_turn_counts(browser, owner):
    old = _conversation(user=owner.user, tenant=owner.tenant, topic="Old revenue", minutes_ago=60)
    new = _conversation(
        user=owner.user, tenant=owner.tenant, topic="New churn", minutes_ago=1, summary="Churn by month."
    )
    untitled = _conversation(user=owner.user, tenant=owner.tenant, minutes_ago=30)
    for _ in range(3):
        _turn(new)
    _turn(old)

    response = browser.get(LIST)

    assert response.status_code == 200
    page = response.content.decode()
    rows = _rows(page)
    assert [row.split(" ")[0] for row in rows] == ["New", "Untitled", "Old"]
    assert rows[0].endswith(" 3")
    assert "Churn by month." in rows[0]
    assert f"Untitled conversation {str(untitled.pk)[:8]}" in rows[1]
    assert rows[1].endswith(" 0")
    assert rows[2].endswith(" 1")
    assert f'href="/conversations/{new.pk}/"' in page
    assert "3 conversations" in _visible(page)


def test_another_person_s_and_a_left_tenant_s_conversations_are_not_listed(browser, owner, member, outsider):
    _conversation(user=owner.user, tenant=owner.tenant, topic="Mine")
    _conversation(user=member.user, tenant=owner.tenant, topic="My colleague's")
    # The owner once belonged to the outsider's tenant: the membership is gone, so are its conversations.
    _conversation(user=owner.user, tenant=outsider.tenant, topic="From a tenant I left")

    page = _visible(browser.get(LIST).content.decode())

    assert "Mine" in page
    assert "My colleague's" not in page
    assert "From a tenant I left" not in page


def test_a_deactivated_tenant_s_conversations_and_filter_disappear(browser, owner):
    paused = TenantFactory.create(slug="paused", name="Paused Inc")
    MembershipFactory.create(user=owner.user, tenant=paused)
    _conversation(user=owner.user, tenant=owner.tenant, topic="Still here")
    hidden = _conversation(user=owner.user, tenant=paused, topic="Paused work")
    paused.is_active = False
    paused.save()

    page = browser.get(LIST).content.decode()

    assert "Still here" in page
    assert "Paused work" not in page
    assert "Paused Inc" not in page
    assert browser.get(f"{LIST}{hidden.pk}/", **HTML).status_code == 404
    assert browser.get(LIST, {"tenant": "paused"}, **HTML).status_code == 404


def test_the_tenant_filter_keeps_one_tenant_s_conversations(browser, owner):
    second = MembershipFactory(user=owner.user, tenant=TenantFactory(slug="globex-test", name="Globex Test"))
    _conversation(user=owner.user, tenant=owner.tenant, topic="Acme question")
    _conversation(user=owner.user, tenant=second.tenant, topic="Globex question")

    everything = browser.get(LIST).content.decode()
    assert '<label for="tenant">Tenant</label>' in everything
    assert "Acme question" in everything
    assert "Globex question" in everything

    page = browser.get(LIST, {"tenant": "globex-test"}).content.decode()

    assert "Globex question" in page
    assert "Acme question" not in page
    assert '<option value="globex-test" selected>' in page


def test_a_tenant_filter_for_a_tenant_not_one_s_own_is_not_found(browser, owner, outsider):
    for slug in ("other-test", "nowhere", "acme\x00", "x" * 10_000):
        response = browser.get(LIST, {"tenant": slug}, **HTML)
        assert response.status_code == 404
        assert NO_TENANT in response.content.decode()


def test_search_finds_topics_containing_the_text_ignoring_case(browser, owner):
    _conversation(user=owner.user, tenant=owner.tenant, topic="Revenue by REGION")
    _conversation(user=owner.user, tenant=owner.tenant, topic="Churn")
    _conversation(user=owner.user, tenant=owner.tenant, topic="100% of_it")

    page = _visible(browser.get(LIST, {"q": "  region "}).content.decode())
    assert "Revenue by REGION" in page
    assert "Churn" not in page
    assert "1 conversation whose topic contains “region”" in page

    # LIKE's wildcards are taken as themselves.
    wild = _visible(browser.get(LIST, {"q": "0% of_"}).content.decode())
    assert "100% of_it" in wild
    assert "Revenue" not in _visible(browser.get(LIST, {"q": "%"}).content.decode())
    assert "No conversation has a topic containing “nothing like it”." in _visible(
        browser.get(LIST, {"q": "nothing like it"}).content.decode()
    )


@pytest.mark.parametrize(
    "q",
    ["\x00", "rev\x00enue", "\ud800", "x" * (SEARCH_MAX_CHARS + 1), "y" * 100_000],
    ids=["nul", "nul-inside", "lone-surrogate", "one-too-long", "huge"],
)
def test_a_search_no_topic_could_hold_matches_nothing_without_a_query(browser, owner, q):
    _conversation(user=owner.user, tenant=owner.tenant, topic="revenue")

    with CaptureQueriesContext(connection) as queries:
        rows = list(conversations_for_person(user_id=owner.user.pk, q=q))
    assert rows == []
    assert queries.captured_queries == []

    # A lone surrogate travels as the bytes that encode it, which Django decodes as U+FFFD.
    response = browser.get(f"{LIST}?q={quote(q, errors='surrogatepass')}")
    assert response.status_code == 200
    page = response.content.decode()
    assert "\x00" not in page
    assert 'maxlength="200"' in page
    assert "No conversation has a topic containing" in page


def test_invalid_utf8_and_a_nul_in_the_raw_query_string_are_no_match_never_a_500(browser, owner):
    _conversation(user=owner.user, tenant=owner.tenant, topic="revenue")

    for raw in (
        "q=%00",
        "q=%ED%A0%80",
        "q=%FF%FE",
        "page=%00",
        "page=-1",
        "page=99999999999999999999",
        "page=" + "9" * 5000,
    ):
        response = browser.get(f"{LIST}?{raw}")
        assert response.status_code == 200, raw


def test_hostile_topics_and_summaries_are_escaped(browser, owner):
    _conversation(
        user=owner.user,
        tenant=owner.tenant,
        topic="<script>alert(1)</script>",
        summary='<img src=x onerror="alert(2)">',
    )

    page = browser.get(LIST, {"q": "<script>"}).content.decode()

    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page
    assert 'value="&lt;script&gt;"' in page


def test_it_pages_twenty_at_a_time_keeping_the_search(browser, owner):
    for index in range(PAGE_SIZE + 3):
        _conversation(user=owner.user, tenant=owner.tenant, topic=f"Topic {index:02}", minutes_ago=index)

    first = browser.get(LIST, {"q": "topic"}).content.decode()
    assert len(_rows(first)) == PAGE_SIZE
    assert "Page 1 of 2" in first
    assert 'href="?q=topic&amp;page=2"' in first

    second = browser.get(LIST, {"q": "topic", "page": "2"}).content.decode()
    assert [row.split(" ")[1] for row in _rows(second)] == ["20", "21", "22"]
    assert 'href="?q=topic&amp;page=1"' in second


def test_the_list_takes_a_fixed_number_of_queries_however_many_turns(browser, owner):
    def count_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert browser.get(LIST).status_code == 200
        return len(queries.captured_queries)

    for index in range(2):
        _turn(_conversation(user=owner.user, tenant=owner.tenant, topic=f"few {index}"))
    few = count_queries()
    for index in range(6):
        conversation = _conversation(user=owner.user, tenant=owner.tenant, topic=f"many {index}")
        for _ in range(3):
            _turn(conversation)

    assert count_queries() == few


def test_the_home_page_nav_links_to_the_conversations(browser):
    page = browser.get("/").content.decode()
    assert '<a href="/conversations/">Conversations</a>' in page
    assert (
        '<a href="/conversations/" aria-current="page">Conversations</a>'
        in browser.get(LIST).content.decode()
    )


def test_a_person_without_a_tenant_is_told_so(client: Client):
    client.force_login(UserFactory.create(username="loner"))
    assert "You belong to no tenant" in client.get(LIST).content.decode()


# --- one conversation -------------------------------------------------------------------------------


def test_a_conversation_shows_each_turn_with_commands_responses_traces_and_feedback(browser, owner):
    conversation = _conversation(user=owner.user, tenant=owner.tenant, topic="Customers", summary="Who buys.")
    _turn(
        conversation,
        request="list customers in France",
        output=_command_output(),
        duration_ms=1234.0,
        feedback_score=0.75,
        feedback_text="Good list.",
        feedback_at=timezone.now(),
    )
    _turn(
        conversation,
        kind=TurnKind.AGENT,
        request="who bought most?",
        success=False,
        duration_ms=250.0,
        output=_command_output(command_name="", command_parameters={}, success=False),
        traces=[
            {
                "timestamp": 1_780_000_000_000,
                "direction": "agent_to_workflow",
                "raw_command": "sales/TopCustomers limit=3",
                "command_name": "sales/TopCustomers",
                "parameters": {"limit": 3},
                "response_text": "",
                "success": True,
            },
            {
                "timestamp": 1_780_000_001_000,
                "direction": "workflow_to_agent",
                "raw_command": "sales/TopCustomers limit=3",
                "command_name": "sales/TopCustomers",
                "parameters": {"limit": 3},
                "response_text": "Ana, Bo, Cy",
                "success": False,
            },
        ],
    )

    response = browser.get(f"{LIST}{conversation.pk}/")

    assert response.status_code == 200
    page = response.content.decode()
    text = _visible(page)
    assert "<h1" in page
    assert "Customers" in text
    assert "Who buys." in text
    assert "Turn 1: Command Succeeded" in text
    assert "took 1.2 s" in text
    assert "list customers in France" in text
    assert "sales/ListCustomers" in text
    assert "&quot;country&quot;: &quot;FR&quot;" in page
    assert "2 customers." in text
    assert '<th scope="col" class="wrap">country</th>' in page
    assert "Ana" in text
    assert "2 rows" in text
    assert "Next: sales/ShowCustomer" in text
    assert "Filter by city next." in text
    assert "Score 0.75" in text
    assert "Good list." in text
    assert "Turn 2: Agent Failed" in text
    assert "took 250 ms" in text
    # The agent's command is the one its trace sent to the workflow.
    second = page.split('id="turn-2"', 1)[1]
    assert '<code class="wrap">sales/TopCustomers</code>' in second
    assert "Agent → workflow" in second
    assert "Workflow → agent" in second
    assert "Ana, Bo, Cy" in second
    assert '<time datetime="2026-05-28T' in second
    assert "No feedback was given." in second


def test_a_long_table_shows_its_first_rows_and_says_so():
    rows = [[index, f"name {index}"] for index in range(TABLE_MAX_ROWS + 25)]
    turn = Turn(
        kind=TurnKind.COMMAND,
        request="all",
        output=_command_output(
            command_responses=[{"response": "", "artifacts": {"columns": ["id", "name"], "rows": rows}}]
        ),
    )

    table = turn_shown(turn=turn, number=1).responses[0].table

    assert table is not None
    assert len(table.rows) == TABLE_MAX_ROWS
    assert table.total_rows == TABLE_MAX_ROWS + 25
    assert table.cut


def test_a_long_trace_shows_its_first_events_and_says_so(browser, owner):
    conversation = _conversation(user=owner.user, tenant=owner.tenant, topic="Chatty agent")
    event = {"direction": "agent_to_workflow", "command_name": "sales/Step", "timestamp": 0}
    _turn(conversation, kind=TurnKind.AGENT, output={}, traces=[event] * (TRACES_MAX + 5))

    page = _visible(browser.get(f"{LIST}{conversation.pk}/").content.decode())

    assert f"The first {TRACES_MAX} of {TRACES_MAX + 5} events, in order" in page


def test_rows_of_any_shape_show_without_failing():
    odd_outputs: list[Any] = [
        [],
        "text",
        {"command_responses": "not a list", "command_name": 7},
        {
            "command_responses": [
                None,
                3,
                {"artifacts": {"columns": ["a"], "rows": [{"a": {"deep": [1]}}, 5, None]}},
            ]
        },
        {"command_responses": [{"artifacts": {"columns": "a", "rows": 1, "other": {"k": "v"}}}]},
    ]
    for output in odd_outputs:
        turn = Turn(
            kind=TurnKind.AGENT, request="r", output=output, traces=[None, {"timestamp": 10**30}, "x"]
        )
        shown = turn_shown(turn=turn, number=1)
        assert [trace.at for trace in shown.traces] == [None, None, None]


def test_parameters_are_cut_and_deep_nesting_is_not_shown():
    assert len(bounded_json({"k": "v" * 10_000})) == JSON_MAX_CHARS
    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    assert bounded_json(deep) == "(not shown: too deeply nested)"


def test_a_hostile_request_response_and_feedback_are_escaped(browser, owner):
    conversation = _conversation(user=owner.user, tenant=owner.tenant, topic="<b>bold</b>")
    hostile = "<script>alert(1)</script>"
    _turn(
        conversation,
        request=hostile,
        feedback_text=hostile,
        output=_command_output(
            command_name=hostile,
            command_responses=[
                {"response": hostile, "artifacts": {"columns": [hostile], "rows": [[hostile]]}}
            ],
        ),
        traces=[
            {
                "direction": hostile,
                "command_name": hostile,
                "response_text": hostile,
                "parameters": {hostile: 1},
            }
        ],
    )

    page = browser.get(f"{LIST}{conversation.pk}/").content.decode()

    assert "<script>" not in page
    assert "<b>bold" not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 7


@pytest.mark.parametrize(
    "conversation_id",
    ["not-a-uuid", "1", "%00", "%ED%A0%80", "x" * 5000, "00000000-0000-0000-0000-00000000000g"],
)
def test_a_malformed_id_is_not_found(browser, owner, conversation_id):
    response = browser.get(f"{LIST}{conversation_id}/", **HTML)

    assert response.status_code == 404
    assert NO_CONVERSATION in response.content.decode()


def test_unknown_another_person_s_and_a_left_tenant_s_conversation_are_the_same_not_found(
    browser, owner, member, outsider
):
    colleague_s = _conversation(user=member.user, tenant=owner.tenant, topic="Colleague")
    stranger_s = _conversation(user=outsider.user, tenant=outsider.tenant, topic="Stranger")
    left = _conversation(user=owner.user, tenant=outsider.tenant, topic="Left behind")

    pages = {
        # The same page but for its style's nonce, which each response draws anew.
        re.sub(r'nonce="[^"]+"', "", browser.get(f"{LIST}{key}/", **HTML).content.decode())
        for key in (uuid.uuid4(), colleague_s.pk, stranger_s.pk, left.pk)
    }

    assert len(pages) == 1
    page = pages.pop()
    assert NO_CONVERSATION in page
    for topic in ("Colleague", "Stranger", "Left behind"):
        assert topic not in page
    assert browser.get(f"{LIST}{colleague_s.pk}/", **HTML).status_code == 404


def test_a_conversation_page_takes_a_fixed_number_of_queries(browser, owner):
    conversation = _conversation(user=owner.user, tenant=owner.tenant, topic="Counted")
    _turn(conversation, output=_command_output())

    def count_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert browser.get(f"{LIST}{conversation.pk}/").status_code == 200
        return len(queries.captured_queries)

    one = count_queries()
    for _ in range(5):
        _turn(conversation, output=_command_output())
    assert count_queries() == one
