"""One of a person's conversations, in process: each turn with its commands, responses (a query's
first rows as a table), traces and feedback, every stored field escaped and bounded, rows of any
shape shown without failing; and everything that is not the person's own (another person's,
another tenant's, a tenant they left, a malformed id) the same "not found"."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import Turn, TurnKind
from portal.conversation_display import (
    JSON_MAX_CHARS,
    TABLE_MAX_ROWS,
    TRACES_MAX,
    bounded_json,
    turn_shown,
)
from portal.conversation_selectors import NO_CONVERSATION
from tests.support.conversation_support import (
    HTML,
    LIST,
    command_output,
    conversation_make,
    turn_make,
    visible_text,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    """The owner, signed in."""
    browser = Client()
    browser.force_login(owner.user)
    return browser


def test_a_conversation_shows_each_turn_with_commands_responses_traces_and_feedback(browser, owner):
    conversation = conversation_make(
        user=owner.user, tenant=owner.tenant, topic="Customers", summary="Who buys."
    )
    turn_make(
        conversation,
        request="list customers in France",
        output=command_output(),
        duration_ms=1234.0,
        feedback_score=0.75,
        feedback_text="Good list.",
        feedback_at=timezone.now(),
    )
    turn_make(
        conversation,
        kind=TurnKind.AGENT,
        request="who bought most?",
        success=False,
        duration_ms=250.0,
        output=command_output(command_name="", command_parameters={}, success=False),
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
    text = visible_text(page)
    assert "<h1" in page
    assert "Customers" in text
    assert "Who buys." in text
    assert "Turn 1: Command Succeeded" in text
    assert "took 1.2 s" in text
    assert "list customers in France" in text
    assert "sales/ListCustomers" in text
    assert "&quot;country&quot;: &quot;FR&quot;" in page
    assert "2 customers." in text
    assert '<th scope="col">country</th>' in page
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
        output=command_output(
            command_responses=[{"response": "", "artifacts": {"columns": ["id", "name"], "rows": rows}}]
        ),
    )

    table = turn_shown(turn=turn, number=1).responses[0].table

    assert table is not None
    assert len(table.rows) == TABLE_MAX_ROWS
    assert table.total_rows == TABLE_MAX_ROWS + 25
    assert table.cut


def test_a_long_trace_shows_its_first_events_and_says_so(browser, owner):
    conversation = conversation_make(user=owner.user, tenant=owner.tenant, topic="Chatty agent")
    event = {"direction": "agent_to_workflow", "command_name": "sales/Step", "timestamp": 0}
    turn_make(conversation, kind=TurnKind.AGENT, output={}, traces=[event] * (TRACES_MAX + 5))

    page = visible_text(browser.get(f"{LIST}{conversation.pk}/").content.decode())

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
    conversation = conversation_make(user=owner.user, tenant=owner.tenant, topic="<b>bold</b>")
    hostile = "<script>alert(1)</script>"
    turn_make(
        conversation,
        request=hostile,
        feedback_text=hostile,
        output=command_output(
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
    colleague_s = conversation_make(user=member.user, tenant=owner.tenant, topic="Colleague")
    stranger_s = conversation_make(user=outsider.user, tenant=outsider.tenant, topic="Stranger")
    left = conversation_make(user=owner.user, tenant=outsider.tenant, topic="Left behind")

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
    conversation = conversation_make(user=owner.user, tenant=owner.tenant, topic="Counted")
    turn_make(conversation, output=command_output())

    def count_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert browser.get(f"{LIST}{conversation.pk}/").status_code == 200
        return len(queries.captured_queries)

    one = count_queries()
    for _ in range(5):
        turn_make(conversation, output=command_output())
    assert count_queries() == one
