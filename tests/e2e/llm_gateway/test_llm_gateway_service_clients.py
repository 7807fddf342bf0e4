"""A tenant's server-side application calling the LLM gateway with client credentials, through real
HTTP against Daphne: the token endpoint gives a service client a token for the API bound to its own
tenant and role; calls are budgeted and recorded as that client; another tenant's keys are never
reached; the token does not open /mcp; and deleting the client stops its next call."""

from __future__ import annotations

import httpx
import pytest

from accounts.models import Tenant
from language_models.models import LlmUsage
from oauth.models import ServiceClient
from oauth.service_clients import service_client_create, service_client_delete
from tests.e2e.llm_gateway_support import INVOKE, api_client, assert_error, invoke_body, script
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db


def _service_client(*, tenant: str, role: str) -> tuple[ServiceClient, str]:
    return service_client_create(tenant=Tenant.objects.get(slug=tenant), name="Reporting job", role=role)


def _model(*, tenant: str, **fields: str) -> object:
    return LanguageModelFactory(tenant=Tenant.objects.get(slug=tenant), **fields)


async def _token(server, client: ServiceClient, secret: str, **form: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        return await http.post(
            "/oauth/token/",
            auth=(client.application.client_id, secret),
            data={"grant_type": "client_credentials", "resource": f"{server.public_url}/api", **form},
        )


@pytest.fixture
def acme_job(committed) -> tuple[ServiceClient, str]:
    return committed(_service_client, tenant="acme", role="contributor")


async def test_a_service_client_calls_the_api_as_itself_in_its_tenant(
    gateway_server, script_path, committed, acme_job
):
    client, secret = acme_job
    committed(_model, tenant="acme", name="acme-openai", model="openai/gpt-4o-mini", api_key="sk-acme")
    script(script_path, "Done.")

    issued = await _token(gateway_server, client, secret, scope="llm:invoke")
    assert issued.status_code == 200, issued.text
    assert "refresh_token" not in issued.json()
    async with api_client(gateway_server, issued.json()["access_token"], **{"X-Request-Id": "svc-1"}) as http:
        response = await http.post(INVOKE, json=invoke_body())

    assert response.status_code == 200, response.text
    row = await LlmUsage.objects.select_related("tenant").aget(request_id="svc-1")
    assert (row.tenant.slug, row.user_id, row.application_id) == (
        "acme",
        client.account_id,
        client.application_id,
    )


async def test_another_tenants_key_stays_out_of_reach(gateway_server, committed, acme_job):
    client, secret = acme_job
    # globex has an Anthropic key; acme has none.
    committed(
        _model, tenant="globex", name="globex-claude", model="anthropic/claude-sonnet-4-5", api_key="gx"
    )
    token = (await _token(gateway_server, client, secret, scope="llm:invoke")).json()["access_token"]

    async with api_client(gateway_server, token) as http:
        response = await http.post(INVOKE, json=invoke_body(provider="anthropic", model="claude-sonnet-4-5"))

    assert_error(response, status=409, code="not_configured")


async def test_a_service_clients_token_is_for_the_api_only(gateway_server, acme_job):
    client, secret = acme_job

    for_mcp = await _token(gateway_server, client, secret, resource=gateway_server.resource_url)
    token = (await _token(gateway_server, client, secret)).json()["access_token"]
    async with api_client(gateway_server, token) as http:
        at_mcp = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )

    assert for_mcp.status_code == 400
    assert for_mcp.json()["error"] == "invalid_target"
    assert at_mcp.status_code == 401


async def test_a_viewer_service_client_gets_no_token_for_the_api(gateway_server, committed):
    client, secret = committed(_service_client, tenant="acme", role="viewer")

    issued = await _token(gateway_server, client, secret)

    # A viewer may hold none of the API's scopes: refused at the token endpoint, saying why.
    assert issued.status_code == 400, issued.text
    assert issued.json()["error"] == "invalid_scope"


async def test_a_deleted_service_client_is_refused_at_once(gateway_server, committed, acme_job):
    client, secret = acme_job
    token = (await _token(gateway_server, client, secret, scope="llm:invoke")).json()["access_token"]

    committed(service_client_delete, service_client=client)
    async with api_client(gateway_server, token) as http:
        response = await http.post(INVOKE, json=invoke_body())
    refused = await _token(gateway_server, client, secret)

    assert_error(response, status=401, code="unauthorized")
    assert refused.status_code == 401
