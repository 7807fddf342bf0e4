"""The standalone ``GET /mcp`` stream of a handshake-era session, in raw HTTP (what the SDK client
hides: event ids, ``Last-Event-ID``, status codes): a change heard on the stream of either worker,
resumption on another worker after a disconnect, what an unknown position gets, the refusals, the
per-person bound, a stream ended by its token's revocation, and hostile subscriptions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.utils import timezone

from accounts.models import Role
from core.models import AuditAction, AuditOutcome
from data_agent.models import Ontology, OntologyStatus
from data_agent.resources import ONTOLOGY_URI
from mcp_gateway.models import TenantToolset
from oauth.models import AccessToken
from tests.e2e.raw_mcp import RawMcp, sse_messages
from tests.e2e.stamping import audit_events
from tests.support.factories import AccessTokenFactory, MembershipFactory, OntologyFactory

pytestmark = pytest.mark.django_db

TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
WAIT_SECONDS = 20


@dataclass
class Frame:
    id: str | None
    message: dict[str, Any] | None


class Stream:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()

    async def next(self) -> Frame:
        """The next frame (a ping's comment is skipped); the priming frame has no message."""
        event_id: str | None = None
        data: str | None = None
        async with asyncio.timeout(WAIT_SECONDS):
            async for line in self.lines:
                if line.startswith("id:"):
                    event_id = line[3:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                elif line == "" and (event_id is not None or data is not None):
                    return Frame(event_id, json.loads(data) if data else None)
        raise EOFError("the stream ended")

    async def ended(self) -> bool:
        try:
            while True:
                await self.next()
        except EOFError:
            return True


@dataclass
class Client:
    raw: RawMcp
    session_id: str
    membership: Any
    token: Any

    @property
    def tenant(self) -> Any:
        return self.membership.tenant

    @asynccontextmanager
    async def stream(self, url: str, **headers: str | bytes) -> AsyncIterator[Stream]:
        sent = [
            (name.encode(), value if isinstance(value, bytes) else value.encode())
            for name, value in {
                **self.raw.headers(self.session_id),
                "accept": "text/event-stream",
                **headers,
            }.items()
        ]
        async with self.raw.http.stream("GET", url, headers=sent, timeout=WAIT_SECONDS) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            yield Stream(response)


@pytest.fixture
async def client(committed, server):
    made: list[RawMcp] = []

    async def make(*, role: str = Role.ADMIN, scope: str = "mcp:read mcp:write", membership=None) -> Client:
        membership = membership or committed(MembershipFactory, role=role)
        committed(
            lambda: TenantToolset.objects.update_or_create(
                tenant=membership.tenant, toolset="conformance", defaults={"enabled": True}
            )
        )
        token = committed(AccessTokenFactory, membership=membership, scope=scope, resource=[server.mcp_url])
        raw = RawMcp(token.token)
        made.append(raw)
        return Client(raw, await raw.initialize(server.mcp_url), membership, token)

    yield make
    for raw in made:
        await raw.aclose()


def _toggle(committed, tenant, *, enabled: bool) -> None:
    committed(
        lambda: (
            TenantToolset.objects.filter(tenant=tenant, toolset="conformance_dynamic").delete()
            if not enabled
            else TenantToolset.objects.update_or_create(
                tenant=tenant, toolset="conformance_dynamic", defaults={"enabled": True}
            )
        )
    )


async def test_a_change_is_heard_with_its_id_and_a_reconnection_elsewhere_resumes_after_it(
    server, second_server, client, committed
):
    alice = await client()
    async with alice.stream(server.mcp_url) as stream:
        priming = await stream.next()
        assert priming.message is None
        assert priming.id is not None
        _toggle(committed, alice.tenant, enabled=True)
        heard = [await stream.next(), await stream.next()]
    assert {f.message["method"] for f in heard} == {TOOLS_CHANGED, PROMPTS_CHANGED}
    first_id = heard[0].id
    assert first_id is not None
    assert first_id != priming.id

    # Disconnected: a change happens meanwhile; the client comes back to the other worker.
    _toggle(committed, alice.tenant, enabled=False)
    async with alice.stream(second_server.mcp_url, **{"last-event-id": first_id}) as stream:
        assert (await stream.next()).message is None
        missed = [await stream.next(), await stream.next()]
    assert {f.message["method"] for f in missed} == {TOOLS_CHANGED, PROMPTS_CHANGED}
    assert all(f.id not in (None, first_id) for f in missed)


async def test_event_ids_say_nothing_of_another_tenants_changes(server, client, committed):
    """Shown failing before: the ids were the change log's position, one sequence for every
    tenant, and Carol's priming ids around Alice's three changes differed by exactly three."""
    alice, carol = await client(), await client()
    async with carol.stream(server.mcp_url) as stream:
        before = (await stream.next()).id
    for enabled in (True, False, True):
        _toggle(committed, alice.tenant, enabled=enabled)
    async with carol.stream(server.mcp_url) as stream:
        after = (await stream.next()).id
    assert before is not None
    assert after is not None
    assert not before.isdigit(), before
    assert not after.isdigit(), after
    # Carol resumes from before Alice's changes: none is replayed to her. Her own change comes
    # first (a replay, or "every list changed", would come before it).
    async with carol.stream(server.mcp_url, **{"last-event-id": before}) as stream:
        assert (await stream.next()).message is None
        _toggle(committed, carol.tenant, enabled=True)
        heard = {(await stream.next()).message["method"] for _ in range(2)}
    assert heard == {TOOLS_CHANGED, PROMPTS_CHANGED}
    # Carol's id opens for Carol's tenant only: Alice presenting it is told every list changed.
    async with alice.stream(server.mcp_url, **{"last-event-id": before}) as stream:
        assert (await stream.next()).message is None
        told = {(await stream.next()).message["method"] for _ in range(3)}
    assert told == {TOOLS_CHANGED, PROMPTS_CHANGED, RESOURCES_CHANGED}


@pytest.mark.parametrize(
    "last_event_id", [b"not-a-number", b"9" * 40, b"99999999999", b"-1", b"1\xc3\xa9", b"\xff"]
)
async def test_a_position_this_server_never_sent_is_told_every_list_changed(server, client, last_event_id):
    alice = await client()
    async with alice.stream(server.mcp_url, **{"last-event-id": last_event_id}) as stream:
        assert (await stream.next()).message is None
        told = {(await stream.next()).message["method"] for _ in range(3)}
    assert told == {TOOLS_CHANGED, PROMPTS_CHANGED, RESOURCES_CHANGED}


async def test_refusals_are_the_endpoints_own_errors(server, client):
    alice, bob = await client(), await client()
    url = server.mcp_url
    plain_json = await alice.raw.http.get(
        url, headers={**alice.raw.headers(alice.session_id), "accept": "application/json"}
    )
    assert plain_json.status_code == 406
    assert plain_json.json()["error"]["code"] == -32600
    no_session = await alice.raw.http.get(url, headers={**alice.raw.headers(), "accept": "text/event-stream"})
    assert no_session.status_code == 400
    someone_elses = await alice.raw.http.get(
        url, headers={**alice.raw.headers(bob.session_id), "accept": "text/event-stream"}
    )
    assert someone_elses.status_code == 404
    assert someone_elses.json()["error"]["code"] == -32002
    put = await alice.raw.http.put(url, headers=alice.raw.headers(alice.session_id), content=b"{}")
    assert put.status_code == 405
    assert put.headers["allow"] == "GET, POST, DELETE"


async def test_one_person_holds_a_bounded_number_of_streams_and_a_session_one(server, client, committed):
    first = await client()
    membership = first.membership
    people = [first] + [await client(membership=membership) for _ in range(9)]
    async with _streams(server, people) as streams:
        assert len(streams) == 10
        extra = await client(membership=membership)
        refused = await extra.raw.http.get(
            server.mcp_url, headers={**extra.raw.headers(extra.session_id), "accept": "text/event-stream"}
        )
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == -32000
        [event] = await audit_events(refused.headers["x-request-id"])
        assert (event.action, event.outcome) == (AuditAction.RATE_LIMITED, AuditOutcome.DENIED)
        assert event.detail["reason"] == "streams_per_person"
        assert (event.user_id, event.session_id) == (membership.user_id, extra.session_id)
        # The same session again replaces its stream (a reconnecting client's old one may linger).
        async with first.stream(server.mcp_url) as again:
            assert (await again.next()).message is None
            assert await streams[0].ended()


@asynccontextmanager
async def _streams(server, people: list[Client]) -> AsyncIterator[list[Stream]]:
    async with AsyncExitStack() as stack:
        streams = []
        for person in people:
            stream = await stack.enter_async_context(person.stream(server.mcp_url))
            assert (await stream.next()).message is None
            streams.append(stream)
        yield streams


async def test_a_stream_ends_when_its_token_is_revoked(server, client, committed):
    alice = await client()
    async with alice.stream(server.mcp_url) as stream:
        assert (await stream.next()).message is None
        committed(lambda: AccessToken.objects.filter(pk=alice.token.pk).update(expires=timezone.now()))
        assert await stream.ended()
    again = await alice.raw.http.get(
        server.mcp_url, headers={**alice.raw.headers(alice.session_id), "accept": "text/event-stream"}
    )
    assert again.status_code == 401


@pytest.mark.parametrize(
    "uri",
    [
        '""',
        '"test://static\\u0000text"',
        json.dumps("x" * 3000),
        '"gatehouse://ontologies/\\ud800"',
        '{"a": [[[]]]}',
    ],
)
async def test_a_hostile_subscription_is_refused_with_invalid_params(server, client, uri):
    """Each ``uri`` as JSON text: a lone surrogate's escape cannot be written from Python."""
    alice = await client()
    body = f'{{"jsonrpc": "2.0", "id": 7, "method": "resources/subscribe", "params": {{"uri": {uri}}}}}'
    response = await alice.raw.http.post(
        server.mcp_url, content=body.encode(), headers=alice.raw.headers(alice.session_id)
    )
    assert response.status_code == 200, response.text
    (message,) = [m for m in sse_messages(response) if "id" in m]
    assert message["error"]["code"] == -32602, message


async def test_a_viewer_without_the_scope_cannot_subscribe_to_the_catalogue(server, client, committed):
    bob = await client(role=Role.VIEWER, scope="mcp:read")
    committed(
        lambda: TenantToolset.objects.update_or_create(
            tenant=bob.tenant, toolset="data_agent", defaults={"enabled": True}
        )
    )
    response = await bob.raw.request(
        server.mcp_url, "resources/subscribe", {"uri": "gatehouse://ontologies"}, session_id=bob.session_id
    )
    (message,) = [m for m in sse_messages(response) if "id" in m]
    assert message["error"]["code"] == -32001, message
    [event] = await audit_events(response.headers["x-request-id"])
    assert (event.action, event.outcome) == (AuditAction.PERMISSION_DENIED, AuditOutcome.DENIED)


async def test_another_tenant_s_ontology_subscribed_to_is_never_heard(server, client, committed):
    """Subscribing to another tenant's ontology is answered as for a URI nothing serves (nothing says
    it exists), and its edits never reach the stream; the caller's own ontology's do."""
    alice = await client(scope="mcp:read ontologies:read")
    committed(
        lambda: TenantToolset.objects.update_or_create(
            tenant=alice.tenant, toolset="data_agent", defaults={"enabled": True}
        )
    )
    own = committed(OntologyFactory, tenant=alice.tenant, status=OntologyStatus.READY)
    foreign = committed(OntologyFactory, status=OntologyStatus.READY)
    assert foreign.tenant_id != alice.tenant.pk
    for ontology in (foreign, own):
        uri = ONTOLOGY_URI.format(id=ontology.pk)
        result = await alice.raw.result(
            server.mcp_url, "resources/subscribe", {"uri": uri}, session_id=alice.session_id
        )
        assert result == {}
    async with alice.stream(server.mcp_url) as stream:
        assert (await stream.next()).message is None
        committed(lambda: Ontology.objects.get(pk=foreign.pk).save())
        committed(lambda: Ontology.objects.get(pk=own.pk).save())
        heard = (await stream.next()).message
    assert heard == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": ONTOLOGY_URI.format(id=own.pk)},
    }
