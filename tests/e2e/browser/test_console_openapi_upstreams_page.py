"""The console's upstreams page in real headless Chromium, for an OpenAPI upstream: alice (acme's
admin) uploads a file that is not an OpenAPI document and is told so under the upload box; she then
uploads the pets API's document (served by a local API on loopback, its base URL entered) and sees
its operations listed as tools, and again on its change form. Screenshots at 1280 px and on a
phone for CI, and no Content-Security-Policy violation."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from tests.e2e.browser.pages import fits_the_viewport, policy_violations, sign_in_by_keyboard
from tests.e2e.harness import DEMO_PASSWORD
from tests.support.openapi_document_server import PETS_TOOLS, openapi_server, pets_document_bytes
from upstreams.openapi.document import NOT_OPENAPI

pytestmark = pytest.mark.django_db

UPSTREAMS_PATH = "/console/acme/upstreams/"
NAME = "pets-browser"
PHONE = {"width": 390, "height": 844}


async def _open_as_alice(page: Page) -> None:
    await page.goto(f"/accounts/login/?next={UPSTREAMS_PATH}")
    await sign_in_by_keyboard(page, username="alice", password=DEMO_PASSWORD)
    await expect(page.get_by_role("heading", level=2, name="Upstream servers")).to_be_visible()


async def _fill(page: Page, *, base_url: str, document: Path) -> None:
    form = page.locator("#upstream-form")
    await form.get_by_label("Name", exact=True).fill(NAME)
    await form.get_by_label("Enabled", exact=True).check()
    await form.get_by_label("Transport", exact=True).select_option("openapi")
    await form.get_by_label("URL", exact=True).fill(base_url)
    await form.get_by_label("Or upload the document", exact=True).set_input_files(document)
    await form.get_by_role("button", name="Add the upstream").click()


async def test_alice_uploads_an_openapi_document_and_sees_its_operations_as_tools(
    wide_tab, server, committed, tmp_path
):
    not_openapi = tmp_path / "not-openapi.json"
    not_openapi.write_bytes(b'{"hello": "world"}')
    pets = tmp_path / "pets.json"
    pets.write_bytes(pets_document_bytes())
    page = wide_tab.page
    violations = policy_violations(page)
    await _open_as_alice(page)

    with openapi_server() as api:
        await _fill(page, base_url=api.url("/api"), document=not_openapi)
        await expect(page.locator("#upstream-form ul.errorlist")).to_contain_text(NOT_OPENAPI)
        await wide_tab.screenshot("console-openapi-upstream-refused")

        await _fill(page, base_url=api.url("/api"), document=pets)
        await expect(
            page.get_by_role("status").filter(has_text=f"{NAME} is saved: connected, 3 tools")
        ).to_be_visible()

    row = page.locator(f"#upstream-{NAME}")
    await expect(row).to_contain_text("Document: uploaded")
    await row.locator("summary").click()
    for tool in PETS_TOOLS:
        await expect(row.get_by_text(tool, exact=True)).to_be_visible()
    await wide_tab.screenshot("console-openapi-upstream-added")

    await row.get_by_role("link", name=f"Change {NAME}").click()
    operations = page.locator("#openapi-operations")
    for tool in PETS_TOOLS:
        await expect(operations.get_by_text(tool, exact=True)).to_be_visible()
    await page.set_viewport_size(PHONE)
    await fits_the_viewport(page)
    await wide_tab.screenshot("console-openapi-upstream-phone")
    assert violations == []
