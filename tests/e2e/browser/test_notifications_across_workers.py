"""Notifications that cross workers, as a client and an operator meet them: the official SDK client
holds its session's standalone GET stream on worker A while an operator, signed in to the admin on
worker B in Chromium, turns a toolset off for the client's tenant; the client hears
``notifications/tools/list_changed`` and its next ``tools/list`` lacks the toolset's tools. Beside
it: a subscribed resource's update, a role change, and a stream ended with its session."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from mcp_types import ServerNotification
from playwright.async_api import Page, expect

from accounts.models import Membership, Role, Tenant
from data_agent.models import Ontology, OntologyStatus
from data_agent.resources import ONTOLOGY_URI
from mcp_gateway.models import TenantToolset
from tests.e2e.browser.conftest import WIDE, open_tab
from tests.e2e.harness import Person, sdk_client
from tests.support.factories import DEFAULT_PASSWORD, OntologyFactory, UserFactory
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.django_db,
    # Handshake-era sessions still subscribe this way; the SDK warns it is gone from 2026-07-28.
    pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed"),
]

TOOLS_CHANGED = "notifications/tools/list_changed"
RESOURCE_UPDATED = "notifications/resources/updated"
STREAMS_OPEN = re.compile(r"^gatehouse_mcp_streams_open (\S+)$", re.MULTILINE)
WAIT_SECONDS = 20


class Heard:
    """The notifications an SDK client's message handler received, to wait on."""

    def __init__(self) -> None:
        self.methods: list[str] = []
        self.params: list[dict] = []
        self._changed = asyncio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, ServerNotification):
            dumped = message.model_dump(mode="json", by_alias=True, exclude_none=True)
            self.methods.append(dumped["method"])
            self.params.append(dumped.get("params") or {})
            self._changed.set()

    async def wait_for(self, method: str) -> int:
        async with asyncio.timeout(WAIT_SECONDS):
            while method not in self.methods:
                self._changed.clear()
                await self._changed.wait()
        return self.methods.index(method)


async def _streams_open(server) -> float:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"{server.base_url}/metrics")
    response.raise_for_status()
    found = STREAMS_OPEN.search(response.text)
    return float(found.group(1)) if found else 0.0


async def _wait_for_streams(server, count: float) -> None:
    """The SDK opens its GET stream on its own after the handshake: wait until the worker holds it
    (a change committed before the stream opened is not the stream's to tell)."""
    async with asyncio.timeout(WAIT_SECONDS):
        while await _streams_open(server) != count:  # noqa: ASYNC110 (another process's state)
            await asyncio.sleep(0.05)


@pytest.fixture
def operator(committed):
    return committed(UserFactory, username="stream-operator", is_staff=True, is_superuser=True)


async def _turn_off_in_the_admin(page: Page, *, tenant: Tenant, toolset: str, username: str) -> None:
    await page.goto(f"/admin/login/?next=/admin/accounts/tenant/{tenant.pk}/change/")
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(DEFAULT_PASSWORD)
    await page.get_by_role("button", name="Log in").click()
    row = page.locator("tr.form-row", has=page.locator(f"select option[value='{toolset}']:checked"))
    await row.locator("input[type=checkbox][name$='-enabled']").uncheck()
    await page.locator("input[name='_continue']").click()
    await expect(page.locator(".messagelist .success")).to_be_visible()


async def test_a_toolset_turned_off_in_the_admin_on_worker_b_reaches_the_get_stream_on_worker_a(
    server, second_server, committed, operator, chromium
):
    acme = await Tenant.objects.aget(slug="acme")
    committed(
        lambda: TenantToolset.objects.update_or_create(
            tenant=acme, toolset="conformance", defaults={"enabled": True}
        )
    )
    heard = Heard()
    async with sdk_client(server, Person("alice"), message_handler=heard) as (client, _):
        tools = client.server_capabilities.tools
        assert tools is not None
        assert tools.list_changed is True
        before = {tool.name for tool in (await client.list_tools()).tools}
        assert "test_simple_text" in before
        await _wait_for_streams(server, 1)

        async with open_tab(second_server, chromium, WIDE) as tab:
            await _turn_off_in_the_admin(
                tab.page, tenant=acme, toolset="conformance", username=operator.username
            )

        await heard.wait_for(TOOLS_CHANGED)
        after = {tool.name for tool in (await client.list_tools()).tools}
    assert "test_simple_text" not in after
    assert after < before


async def test_a_subscribed_resource_edited_elsewhere_is_heard_and_an_unsubscribed_one_is_not(
    server, committed
):
    acme = await Tenant.objects.aget(slug="acme")
    ontology = committed(OntologyFactory, tenant=acme, status=OntologyStatus.READY)
    uri = ONTOLOGY_URI.format(id=ontology.pk)
    witness = committed(OntologyFactory, tenant=acme, status=OntologyStatus.READY)
    witness_uri = ONTOLOGY_URI.format(id=witness.pk)
    heard = Heard()
    async with sdk_client(server, Person("alice"), message_handler=heard) as (client, _):
        await client.subscribe_resource(uri)
        await _wait_for_streams(server, 1)

        def edit() -> None:
            Ontology.objects.filter(pk=ontology.pk).update(description="edited")  # no signal: not heard
            Ontology.objects.get(pk=ontology.pk).save()

        committed(edit)
        await heard.wait_for(RESOURCE_UPDATED)
        assert {"uri": uri} in heard.params
        assert all(p.get("uri") in (None, uri) for p in heard.params)

        await client.unsubscribe_resource(uri)
        committed(lambda: Ontology.objects.get(pk=ontology.pk).save())
        # A witness: an edit made after that one, to a resource subscribed to now. The worker tells
        # its streams of changes in the order they were made, so once the witness's update is
        # heard, one for the unsubscribed resource would have come before it.
        await client.subscribe_resource(witness_uri)
        committed(lambda: Ontology.objects.get(pk=witness.pk).save())
        await eventually(
            lambda: {"uri": witness_uri} in heard.params, within=WAIT_SECONDS, what="the witness's update"
        )
    updated = [
        params
        for method, params in zip(heard.methods, heard.params, strict=True)
        if method == RESOURCE_UPDATED
    ]
    assert updated == [{"uri": uri}, {"uri": witness_uri}]


async def test_a_role_change_tells_the_stream_its_lists_changed(server, committed):
    heard = Heard()
    async with sdk_client(server, Person("bob"), message_handler=heard) as (client, _):
        await client.list_tools()
        await _wait_for_streams(server, 1)
        committed(lambda: Membership.objects.filter(user__username="bob").update(role=Role.ADMIN))
        try:
            await heard.wait_for(TOOLS_CHANGED)
        finally:
            committed(lambda: Membership.objects.filter(user__username="bob").update(role=Role.VIEWER))


async def test_the_stream_ends_with_its_session(server):
    async with sdk_client(server, Person("alice"), message_handler=Heard()) as (client, _):
        await client.list_tools()
        await _wait_for_streams(server, 1)
    # The client's DELETE went to the same worker here; the stream is gone with the session.
    await _wait_for_streams(server, 0)
