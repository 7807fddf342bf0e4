"""Enterprise-managed authorization end to end: the official SDK client's identity-assertion
provider (``IdentityAssertionOAuthProvider``, SEP-990) against Daphne. A test identity provider
(a real local HTTP server) issues the ID-JAG for acme's person; the client exchanges it at
Gatehouse's token endpoint and calls a tool as that person, with the role the provider's groups
map to, and no browser or consent screen on the way. A replayed assertion is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import Application

from accounts.models import IdentityProvider, Role, Tenant
from oauth.identity_assertion.grant import JWT_BEARER
from tests.e2e.harness import MemoryTokenStorage
from tests.support.assertion_issuer import AssertionIssuer

pytestmark = pytest.mark.django_db

SECRET = "enterprise-agent-secret-91b2"


@pytest.fixture(scope="module")
def idp() -> Iterator[AssertionIssuer]:
    with AssertionIssuer() as running:
        yield running


@pytest.fixture
def agent(committed, idp) -> Application:
    committed(
        IdentityProvider.objects.create,
        tenant=Tenant.objects.get(slug="acme"),
        name="Acme SSO",
        issuer=idp.issuer,
        client_id="gatehouse",
        role_map={"gh-admins": "admin"},
        accepts_identity_assertions=True,
    )
    return committed(
        Application.objects.create,
        name="Enterprise agent",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=SECRET,
    )


async def test_the_sdk_client_exchanges_an_id_jag_and_calls_a_tool_as_the_person(server, agent, idp):
    issued: list[str] = []

    async def assertion(audience: str, resource: str) -> str:
        issued.append(
            idp.issue(
                sub="dana-1",
                aud=audience,
                resource=resource,
                client_id=agent.client_id,
                groups=["gh-admins"],
                email="dana@acme.test",
                email_verified=True,
            )
        )
        return issued[-1]

    auth = IdentityAssertionOAuthProvider(
        server_url=server.mcp_url,
        storage=MemoryTokenStorage(),
        client_id=agent.client_id,
        client_secret=SECRET,
        issuer=server.public_url,
        assertion_provider=assertion,
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        whoami = await client.call_tool("whoami", {})

    assert not whoami.is_error, whoami.content
    answer = whoami.structured_content
    assert answer["tenant"]["slug"] == "acme"
    assert answer["role"] == Role.ADMIN
    assert answer["client"]["client_id"] == agent.client_id
    assert len(issued) == 1

    # The same assertion again, as a client that kept it would send it.
    async with httpx.AsyncClient(base_url=server.base_url) as raw:
        replayed = await raw.post(
            "/oauth/token/",
            data={
                "grant_type": JWT_BEARER, "assertion": issued[0], "client_id": agent.client_id,
                "client_secret": SECRET, "resource": f"{server.public_url}/mcp",
            },
        )  # fmt: skip
    assert replayed.status_code == 400
    assert json.loads(replayed.content)["error"] == "invalid_grant"
