"""The people's own pages in real headless Chromium, each saved as a screenshot for CI: the home
page signed out (what the server is, the address to give a client, a way in) and signed in (tenants
and roles, connected applications, live sessions), and the sessions page, whose sessions are real
ones, opened by the SDK client and a raw client through OAuth and ``initialize``, and are ended with
"End all" by keyboard."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from asgiref.sync import sync_to_async
from mcp.client import Client
from mcp.types import Implementation
from playwright.async_api import Page, expect

from accounts.models import Tenant, User
from mcp_gateway.models import McpSession, TerminationReason
from portal.views import SESSIONS_ENDED
from tests.e2e.browser.pages import sign_in_by_keyboard, tab_to
from tests.e2e.harness import DaphneServer, Person, sdk_client
from tests.e2e.oauth_driver import access_token
from tests.e2e.raw_mcp import RawMcp
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

# What the SDK client declares itself to be at initialize (``clientInfo``).
SDK_CLIENT = Implementation(name="Screenshot SDK client", version="1.2.3")
RAW_CLIENT_NAME = "raw-screenshot-client"
# The name the harness's client registers under: the OAuth application's name.
APPLICATION_NAME = "Gatehouse e2e client"


@pytest.fixture
def fran(committed) -> Person:
    """A fresh person, admin in acme and viewer in globex, so her pages show only this test's rows."""
    user = committed(UserFactory, username=f"fran-{secrets.token_hex(3)}")
    committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="acme"), role="admin")
    committed(MembershipFactory, user=user, tenant=Tenant.objects.get(slug="globex"), role="viewer")
    return Person(user.username, password=DEFAULT_PASSWORD, tenant="acme")


@asynccontextmanager
async def _live_sdk_session(server: DaphneServer, person: Person) -> AsyncIterator[Client]:
    """An SDK client that connected (OAuth, consent, initialize) and holds its session open."""
    async with sdk_client(server, person, client_info=SDK_CLIENT) as (client, _):
        assert not (await client.call_tool("whoami", {})).is_error
        yield client


async def _sign_in(page: Page, person: Person, *, next_path: str) -> None:
    await page.goto(f"/accounts/login/?next={next_path}")
    await sign_in_by_keyboard(page, username=person.username, password=person.password)
    await expect(page.get_by_role("button", name=f"Sign out {person.username}")).to_be_visible()


@sync_to_async
def _sessions_of(username: str) -> list[McpSession]:
    return list(McpSession.objects.filter(user=User.objects.get(username=username)).order_by("created"))


async def test_home_signed_out_says_what_this_is_gives_the_mcp_address_and_a_sign_in_link(tab, server):
    page = tab.page
    await page.goto("/")

    await expect(page.get_by_role("heading", level=1, name="Gatehouse")).to_be_visible()
    await expect(page.get_by_text("This server gives AI clients")).to_be_visible()
    await expect(page.locator("#mcp-url")).to_have_text(server.resource_url)
    sign_in = page.get_by_role("link", name="Sign in")
    await expect(sign_in).to_have_attribute("href", "/accounts/login/?next=/")
    await expect(page.get_by_role("heading", name="Your tenants")).to_have_count(0)
    await tab.screenshot("home-signed-out")

    await tab_to(page, sign_in)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Sign in to Gatehouse")).to_be_visible()


async def test_home_signed_in_shows_tenants_and_roles_connected_applications_and_sessions(tab, server, fran):
    async with _live_sdk_session(server, fran):
        page = tab.page
        await _sign_in(page, fran, next_path="/")

        await expect(page.get_by_role("navigation", name="Your account")).to_be_visible()
        tenants = page.locator("#tenants")
        await expect(tenants.get_by_role("listitem")).to_have_count(2)
        await expect(tenants).to_contain_text("Acme")
        await expect(tenants).to_contain_text("you are admin")
        await expect(tenants).to_contain_text("Globex")
        await expect(tenants).to_contain_text("you are viewer")
        await expect(page.get_by_role("heading", name="Connected applications")).to_be_visible()
        await expect(page.locator("#connected")).to_contain_text(f"{APPLICATION_NAME} in Acme")
        await expect(page.get_by_role("heading", name="Active sessions")).to_be_visible()
        await expect(page.locator("#sessions")).to_contain_text(f"{SDK_CLIENT.name} {SDK_CLIENT.version}")
        await expect(page.locator("#sessions")).to_contain_text("in Acme, last seen")
        await tab.screenshot("home-signed-in")


async def test_the_sessions_page_tells_real_sessions_apart_and_end_all_ends_them_by_keyboard(
    tab, server, fran
):
    raw = RawMcp(await access_token(server, fran))
    try:
        async with _live_sdk_session(server, fran):
            raw_session = await raw.initialize(server.mcp_url, client_name=RAW_CLIENT_NAME)
            sessions = await _sessions_of(fran.username)
            assert len(sessions) == 2
            page = tab.page
            await _sign_in(page, fran, next_path="/accounts/sessions/")

            table = page.locator("table#sessions")
            headers = await table.get_by_role("columnheader").all_inner_texts()
            assert headers[:6] == ["Client", "Application", "Tenant", "Started", "Last seen", "Id"]
            rows = table.locator("tbody tr")
            await expect(rows).to_have_count(2)
            sdk_row = rows.filter(has_text=SDK_CLIENT.name)
            await expect(sdk_row).to_contain_text(f"version {SDK_CLIENT.version}")
            await expect(sdk_row).to_contain_text(APPLICATION_NAME)
            await expect(sdk_row).to_contain_text("Acme")
            await expect(rows.filter(has_text=RAW_CLIENT_NAME)).to_contain_text("version 9.9")
            for session in sessions:
                row = rows.filter(has=page.locator("code.short-id", has_text=session.pk[:8]))
                await expect(row).to_have_count(1)
                times = row.locator("time")
                await expect(times.nth(0)).to_have_text(f"{session.created:%Y-%m-%d %H:%M} UTC")
                await expect(times.nth(1)).to_contain_text(" UTC")
            text = await page.locator("main").inner_text()
            assert all(session.pk not in text for session in sessions), "only the short id is shown"
            await tab.screenshot("sessions")

            # Every button is reachable by Tab, in the page's order: each session's End, then End all.
            ends = await table.get_by_role("button", name="End session").all()
            assert len(ends) == 2
            for button in ends:
                await tab_to(page, button)
            end_all = page.get_by_role("button", name="End all")
            await expect(end_all).to_have_accessible_description("Ends the 2 sessions listed here.")
            await tab_to(page, end_all)
            await page.keyboard.press("Enter")

            await expect(page.get_by_role("status")).to_have_text(SESSIONS_ENDED.format(count=2, plural="s"))
            await expect(page.get_by_text("No application holds a session open now.")).to_be_visible()
            await tab.screenshot("sessions-ended")
            gone = await raw.request(server.mcp_url, "tools/list", session_id=raw_session)
            assert gone.status_code == 404
    finally:
        await raw.aclose()
    ended = await _sessions_of(fran.username)
    assert [session.termination_reason for session in ended] == [TerminationReason.OWNER] * 2


async def test_a_hostile_client_name_is_shown_as_text_cut_short_and_keeps_the_page_s_width(tab, server, fran):
    hostile = "<img src=x onerror=alert(1)>\u202e" + "W" * 1000
    raw = RawMcp(await access_token(server, fran))
    try:
        await raw.initialize(server.mcp_url, client_name=hostile)
        page = tab.page
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: dialogs.append(dialog.message))
        await _sign_in(page, fran, next_path="/accounts/sessions/")

        name = page.locator("table#sessions bdi.client-name")
        await expect(name).to_have_text(hostile[:79] + "…")
        await expect(page.locator("table#sessions img")).to_have_count(0)
        widths = await page.evaluate(
            "() => ({viewport: window.innerWidth, document: document.documentElement.scrollWidth})"
        )
        print(f"sessions page with a hostile client name: {widths}")
        assert widths["document"] <= widths["viewport"]
        assert dialogs == []
        await tab.screenshot("sessions-hostile-client-name")
    finally:
        await raw.aclose()
