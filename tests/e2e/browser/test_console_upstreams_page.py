"""The console's upstreams page in real headless Chromium: alice (acme's admin) adds an upstream
MCP server (the test server over Streamable HTTP, on loopback) and sees its tools listed, and her
MCP client's next ``tools/list`` has them; she tests its connection and sees its tools and the one
left out, with the reason; she removes it and her client's next list lacks them. Screenshots at
1280 px and on a phone for CI, and no Content-Security-Policy violation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.client import Client
from playwright.async_api import Page, expect

from mcp_gateway.kernel.federated_names import confusable_reason
from portal.console.upstreams import REMOVED
from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD, Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.upstream_support import UpstreamProcess

pytestmark = pytest.mark.django_db

UPSTREAMS_PATH = "/console/acme/upstreams/"
NAME = "docs"
# One of the test server's tools, published under its own name (no prefix).
TOOL = "echo"
# A tool the server publishes besides, confusable with Gatehouse's whoami: left out of the lists.
CONFUSABLE = "wh0ami"
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def http_upstream(tmp_path: Path) -> Iterator[UpstreamProcess]:
    process = UpstreamProcess("http", workdir=tmp_path, options=("--extra-tool", CONFUSABLE)).start()
    yield process
    process.kill()


async def _open_as_alice(page: Page) -> None:
    await page.goto(f"/accounts/login/?next={UPSTREAMS_PATH}")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await expect(page.get_by_role("heading", level=2, name="Upstream servers")).to_be_visible()


async def _tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def test_alice_adds_an_upstream_sees_its_tools_tests_it_and_removes_it(
    wide_tab, server, committed, http_upstream
):
    page = wide_tab.page
    violations = policy_violations(page)
    await _open_as_alice(page)

    form = page.locator("#upstream-form")
    await form.get_by_label("Name", exact=True).fill(NAME)
    await form.get_by_label("Enabled", exact=True).check()
    await form.get_by_label("Transport", exact=True).select_option("http")
    await form.get_by_label("URL", exact=True).fill(http_upstream.url)
    await form.get_by_role("button", name="Add the upstream").click()

    await expect(page.get_by_role("status").filter(has_text=f"{NAME} is saved: connected")).to_be_visible()
    row = page.locator(f"#upstream-{NAME}")
    await row.locator("summary").click()
    await expect(row.get_by_text(TOOL, exact=True)).to_be_visible()
    await wide_tab.screenshot("console-upstreams-added")

    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        assert TOOL in await _tool_names(client)

        await row.get_by_role("button", name=f"Test connection of {NAME}").click()
        answer = page.locator("#test-answer")
        await expect(answer.locator("#test-result")).to_contain_text("Connected: ")
        await expect(answer.locator("#tested-tools").get_by_text(TOOL, exact=True)).to_be_visible()
        reason = confusable_reason("whoami", whose="one of Gatehouse's own")
        await expect(answer.locator("#tested-left-out")).to_have_text(f"Left out {CONFUSABLE!r}: {reason}.")
        await wide_tab.screenshot("console-upstreams-tested")

        await page.locator(f"#upstream-{NAME}").get_by_role("button", name=f"Remove {NAME}").click()
        await expect(page.get_by_role("status")).to_have_text(REMOVED.format(name=NAME))
        await expect(page.locator(f"#upstream-{NAME}")).to_have_count(0)
        assert TOOL not in await _tool_names(client)
    assert violations == []


async def test_the_upstreams_page_fits_a_phone(wide_tab):
    page = wide_tab.page
    await _open_as_alice(page)
    await page.set_viewport_size(PHONE)
    await expect(page.get_by_role("heading", name="Add an upstream")).to_be_visible()
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-upstreams-phone")
