"""A person's conversation list, in process: only their own, only in tenants they are an active
member of, newest updated first, searchable by topic, per tenant, a page at a time; hostile input
never a 500. One conversation's page: tests/portal/test_conversation_detail_page.py. In Chromium:
tests/e2e/browser/test_conversation_pages.py."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.conversation_selectors import NO_TENANT, SEARCH_MAX_CHARS, conversations_for_person
from portal.conversation_views import PAGE_SIZE
from tests.support.conversation_support import (
    HTML,
    LIST,
    conversation_make,
    table_rows,
    turn_make,
    visible_text,
)
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(owner) -> Client:
    """The owner, signed in."""
    browser = Client()
    browser.force_login(owner.user)
    return browser


def test_signed_out_the_pages_send_to_sign_in(client: Client, owner):
    conversation = conversation_make(user=owner.user, tenant=owner.tenant, topic="Q3")

    for path in (LIST, f"{LIST}{conversation.pk}/"):
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_it_lists_the_person_s_conversations_newest_updated_first_with_turn_counts(browser, owner):
    old = conversation_make(user=owner.user, tenant=owner.tenant, topic="Old revenue", minutes_ago=60)
    new = conversation_make(
        user=owner.user, tenant=owner.tenant, topic="New churn", minutes_ago=1, summary="Churn by month."
    )
    untitled = conversation_make(user=owner.user, tenant=owner.tenant, minutes_ago=30)
    for _ in range(3):
        turn_make(new)
    turn_make(old)

    response = browser.get(LIST)

    assert response.status_code == 200
    page = response.content.decode()
    rows = table_rows(page)
    assert [row.split(" ")[0] for row in rows] == ["New", "Untitled", "Old"]
    assert rows[0].endswith(" 3")
    assert "Churn by month." in rows[0]
    assert f"Untitled conversation {str(untitled.pk)[:8]}" in rows[1]
    assert rows[1].endswith(" 0")
    assert rows[2].endswith(" 1")
    assert f'href="/conversations/{new.pk}/"' in page
    assert "3 conversations" in visible_text(page)


def test_another_person_s_and_a_left_tenant_s_conversations_are_not_listed(browser, owner, member, outsider):
    conversation_make(user=owner.user, tenant=owner.tenant, topic="Mine")
    conversation_make(user=member.user, tenant=owner.tenant, topic="My colleague's")
    # The owner once belonged to the outsider's tenant: the membership is gone, so are its conversations.
    conversation_make(user=owner.user, tenant=outsider.tenant, topic="From a tenant I left")

    page = visible_text(browser.get(LIST).content.decode())

    assert "Mine" in page
    assert "My colleague's" not in page
    assert "From a tenant I left" not in page


def test_a_deactivated_tenant_s_conversations_and_filter_disappear(browser, owner):
    paused = TenantFactory.create(slug="paused", name="Paused Inc")
    MembershipFactory.create(user=owner.user, tenant=paused)
    conversation_make(user=owner.user, tenant=owner.tenant, topic="Still here")
    hidden = conversation_make(user=owner.user, tenant=paused, topic="Paused work")
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
    conversation_make(user=owner.user, tenant=owner.tenant, topic="Acme question")
    conversation_make(user=owner.user, tenant=second.tenant, topic="Globex question")

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
    conversation_make(user=owner.user, tenant=owner.tenant, topic="Revenue by REGION")
    conversation_make(user=owner.user, tenant=owner.tenant, topic="Churn")
    conversation_make(user=owner.user, tenant=owner.tenant, topic="100% of_it")

    page = visible_text(browser.get(LIST, {"q": "  region "}).content.decode())
    assert "Revenue by REGION" in page
    assert "Churn" not in page
    assert "1 conversation whose topic contains “region”" in page

    # LIKE's wildcards are taken as themselves.
    wild = visible_text(browser.get(LIST, {"q": "0% of_"}).content.decode())
    assert "100% of_it" in wild
    assert "Revenue" not in visible_text(browser.get(LIST, {"q": "%"}).content.decode())
    assert "No conversation has a topic containing “nothing like it”." in visible_text(
        browser.get(LIST, {"q": "nothing like it"}).content.decode()
    )


@pytest.mark.parametrize(
    "q",
    ["\x00", "rev\x00enue", "\ud800", "x" * (SEARCH_MAX_CHARS + 1), "y" * 100_000],
    ids=["nul", "nul-inside", "lone-surrogate", "one-too-long", "huge"],
)
def test_a_search_no_topic_could_hold_matches_nothing_without_a_query(browser, owner, q):
    conversation_make(user=owner.user, tenant=owner.tenant, topic="revenue")

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
    conversation_make(user=owner.user, tenant=owner.tenant, topic="revenue")

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
    conversation_make(
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
        conversation_make(user=owner.user, tenant=owner.tenant, topic=f"Topic {index:02}", minutes_ago=index)

    first = browser.get(LIST, {"q": "topic"}).content.decode()
    assert len(table_rows(first)) == PAGE_SIZE
    assert "Page 1 of 2" in first
    assert 'href="?q=topic&amp;page=2"' in first

    second = browser.get(LIST, {"q": "topic", "page": "2"}).content.decode()
    assert [row.split(" ")[1] for row in table_rows(second)] == ["20", "21", "22"]
    assert 'href="?q=topic&amp;page=1"' in second


def test_the_list_takes_a_fixed_number_of_queries_however_many_turns(browser, owner):
    def count_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert browser.get(LIST).status_code == 200
        return len(queries.captured_queries)

    for index in range(2):
        turn_make(conversation_make(user=owner.user, tenant=owner.tenant, topic=f"few {index}"))
    few = count_queries()
    for index in range(6):
        conversation = conversation_make(user=owner.user, tenant=owner.tenant, topic=f"many {index}")
        for _ in range(3):
            turn_make(conversation)

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
