"""The REST API's interactive docs in real headless Chromium: ``/docs`` leads to ``/api/v1/docs``,
which renders django-ninja's Swagger UI from our own static files (no CDN: nothing is fetched from
another origin) under the site's Content-Security-Policy, and lists the API's operations."""

from __future__ import annotations

import pytest
from playwright.async_api import expect

pytestmark = pytest.mark.django_db


async def test_the_api_docs_render_from_our_own_files(wide_tab):
    page = wide_tab.page
    requested: list[str] = []
    refused: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.on(
        "console",
        lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None,
    )

    await page.goto("/docs")

    await expect(page).to_have_url(f"{wide_tab.base_url}/api/v1/docs")
    await expect(page.get_by_role("heading", name="Gatehouse API")).to_be_visible()
    for path in ("/api/v1/llm/invoke", "/api/v1/providers", "/api/v1/health"):
        await expect(page.get_by_text(path, exact=True).first).to_be_visible()
    await expect(page.get_by_role("button", name="Authorize")).to_be_visible()
    await wide_tab.screenshot("api-docs")
    assert all(url.startswith(wide_tab.base_url) or url.startswith("data:") for url in requested), requested
    assert refused == []
