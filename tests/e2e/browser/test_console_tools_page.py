"""The console's tools section in real headless Chromium: alice (acme's admin) switches the
workflows toolset off and her MCP client's next ``tools/list`` lacks its tools, then switches it on
again and they are back. Screenshots at 900 and 1280 px for CI."""

from __future__ import annotations

import pytest
from mcp.client import Client
from playwright.async_api import Page, expect

from portal.console.tools import SWITCHED
from tests.e2e.browser.pages import fits_the_viewport, sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD, Person
from tests.e2e.oauth_driver import minted_sdk_client

pytestmark = pytest.mark.django_db

TOOLSET = "workflows"
# One of the workflows toolset's tools, published to acme while the toolset is on.
WORKFLOWS_TOOL = "get_commands"
TOOLS_PATH = "/console/acme/tools/"


async def _open_as_alice(page: Page) -> None:
    await page.goto(f"/accounts/login/?next={TOOLS_PATH}")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await expect(page.get_by_role("heading", level=2, name="Tools")).to_be_visible()


async def _switch(page: Page, state: str) -> None:
    await page.get_by_role("button", name=f"Switch {TOOLSET} {state}").click()
    await expect(page.get_by_role("status")).to_have_text(
        SWITCHED.format(toolset=TOOLSET, state=state, tenant="Acme")
    )


async def _tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_alice_switches_a_toolset_off_and_her_clients_next_tools_list_lacks_it(tab, server, committed):
    page = tab.page
    await _open_as_alice(page)
    toolset = page.locator(f"#toolset-{TOOLSET}")
    await expect(toolset.get_by_role("rowheader", name=WORKFLOWS_TOOL)).to_be_visible()
    await tab.screenshot("console-tools")

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        assert WORKFLOWS_TOOL in await _tool_names(client)

        await _switch(page, "off")
        await expect(toolset.locator(".state")).to_have_text("Off")
        assert WORKFLOWS_TOOL not in await _tool_names(client)
        await tab.screenshot("console-tools-switched-off")

        await _switch(page, "on")
        await expect(toolset.locator(".state")).to_have_text("On")
        assert WORKFLOWS_TOOL in await _tool_names(client)


async def test_the_tools_page_fits_1280_px(wide_tab):
    page = wide_tab.page
    await _open_as_alice(page)
    await expect(page.get_by_role("heading", name="Upstream servers")).to_be_visible()
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-tools-wide")
