"""A person's connected-applications and sessions pages, through Daphne: disconnecting a client
stops its token at /mcp and makes it ask again; ending a session makes its id unknown."""

from __future__ import annotations

import secrets

import pytest

from accounts.models import Tenant
from core.models import AuditAction, AuditEvent
from mcp_gateway.models import McpSession, TerminationReason
from portal.connected import BY_OWNER
from tests.e2e.harness import Browser, Person, parse_form, sdk_client
from tests.e2e.oauth_driver import OAuthDriver, access_token, pkce_pair
from tests.e2e.raw_mcp import RawMcp
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def erin(committed) -> Person:
    """A fresh acme admin, so that her pages show only what this test connected."""
    user = committed(UserFactory, username=f"erin-{secrets.token_hex(3)}")
    committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="acme"), role="admin")
    return Person(user.username, password=DEFAULT_PASSWORD)


async def _page(browser: Browser, person: Person, path: str):
    page = await browser.open(path, username=person.username, password=person.password)
    assert page.status_code == 200, page.text[:500]
    return page


async def test_disconnecting_an_application_stops_its_token_at_mcp_and_it_must_ask_again(
    server, erin, browser
):
    async with sdk_client(server, erin) as (client, storage):
        assert not (await client.call_tool("whoami", {})).is_error
    assert storage.tokens is not None
    assert storage.client_info is not None
    token, client_id = storage.tokens.access_token, str(storage.client_info.client_id)

    page = await _page(browser, erin, "/accounts/connected/")
    assert "Gatehouse e2e client" in page.text
    assert "Acme" in page.text
    assert "Use tools that change data" in page.text
    form = parse_form(page.text)
    assert (form["fields"]["client_id"], form["fields"]["tenant"]) == (client_id, "acme")
    disconnected = await browser.client.post("/accounts/connected/disconnect/", data=form["fields"])
    assert disconnected.status_code == 302
    assert disconnected.headers["location"] == "/accounts/connected/"

    raw = RawMcp(token)
    try:
        refused = await raw.request(server.mcp_url, "tools/list")
    finally:
        await raw.aclose()
    assert refused.status_code == 401

    after = await _page(browser, erin, "/accounts/connected/")
    assert "No application is connected to your account." in after.text
    revoked = AuditEvent.objects.filter(client_id=client_id, action=AuditAction.TOKEN_REVOKED)
    assert {event.detail["by"] async for event in revoked} == {BY_OWNER}

    driver = OAuthDriver(server)
    try:
        _, challenge = pkce_pair()
        url = driver.authorize_url(client_id=client_id, challenge=challenge)
        again = await browser.open(url, username=erin.username, password=erin.password)
    finally:
        await driver.aclose()
    assert again.status_code == 200, "the forgotten consent is asked for again"
    assert 'name="tenant"' in again.text


async def test_the_sessions_page_lists_a_live_session_and_ending_it_makes_its_id_unknown(
    server, erin, browser
):
    raw = RawMcp(await access_token(server, erin))
    try:
        session_id = await raw.initialize(server.mcp_url, client_name="session-page-test")

        page = await _page(browser, erin, "/accounts/sessions/")
        assert "session-page-test" in page.text
        assert "Acme" in page.text
        form = parse_form(page.text, action="/accounts/sessions/end/")
        assert form["fields"]["session"] == session_id
        ended = await browser.client.post("/accounts/sessions/end/", data=form["fields"])
        assert ended.status_code == 302

        gone = await raw.request(server.mcp_url, "tools/list", session_id=session_id)
    finally:
        await raw.aclose()
    assert gone.status_code == 404
    session = await McpSession.objects.aget(pk=session_id)
    assert session.termination_reason == TerminationReason.OWNER
    assert (
        "No application holds a session open now." in (await _page(browser, erin, "/accounts/sessions/")).text
    )


async def test_another_person_s_session_posted_to_end_is_not_found_and_keeps_working(server, erin, browser):
    """Alice works in the same tenant as Erin; her session is hers alone to end."""
    raw = RawMcp(await access_token(server, Person("alice")))
    try:
        theirs = await raw.initialize(server.mcp_url, client_name="alice-client")
        page = await _page(browser, erin, "/accounts/sessions/")
        assert "alice-client" not in page.text
        csrf = parse_form(page.text)["fields"]["csrfmiddlewaretoken"]

        for value in (theirs, theirs[:8], "nul\x00id", "x" * 10_000):
            refused = await browser.client.post(
                "/accounts/sessions/end/", data={"csrfmiddlewaretoken": csrf, "session": value}
            )
            assert refused.status_code == 404, (value[:20], refused.text[:300])
            assert refused.json()["error"] == "not_found"
        ended_all = await browser.client.post(
            "/accounts/sessions/end-all/", data={"csrfmiddlewaretoken": csrf}
        )
        assert ended_all.status_code == 302

        still = await raw.request(server.mcp_url, "tools/list", session_id=theirs)
    finally:
        await raw.aclose()
    assert still.status_code == 200, "neither End nor End all reaches another person's session"
    assert (await McpSession.objects.aget(pk=theirs)).terminated_at is None
