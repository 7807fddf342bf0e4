"""A tenant's server-side application gets API tokens with the client-credentials grant, through
real HTTP against Daphne: only a service client, only for the API, acting as its own account in
its one tenant, and refused (saying why) once that account or tenant can no longer act."""

from __future__ import annotations

import base64
import re

import httpx
import pytest

from accounts.models import Membership, Role, Tenant, User
from accounts.scopes import scopes_for_role
from core.errors import AuthenticationFailed
from core.models import AuditAction, AuditEvent, AuditOutcome
from mcp_gateway.transport.bearer import identity_from_bearer
from oauth.bearer import TOKEN_NOT_MEMBER, TOKEN_UNKNOWN, TOKEN_WRONG_RESOURCE, identity_from_api_bearer
from oauth.models import ServiceClient
from oauth.resource import API_SCOPES
from oauth.service_clients import service_client_create, service_client_delete
from oauth.validators import (
    ACCOUNT_INACTIVE,
    NOT_A_MEMBER,
    NOT_A_SERVICE_CLIENT,
    ROLE_GRANTS_NO_SCOPE,
    TENANT_INACTIVE,
)
from tests.e2e.conftest import _in_own_thread
from tests.e2e.harness import Person, parse_form
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body
from tests.support.factories import ApplicationFactory, TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("resolve_here")]


def _service_client(*, tenant_slug: str, role: str = Role.CONTRIBUTOR, name: str = "Backend job"):
    def make() -> tuple[ServiceClient, str]:
        tenant = Tenant.objects.get(slug=tenant_slug)
        service_client, secret = service_client_create(tenant=tenant, name=name, role=role)
        # Read back what a test needs, so nothing lazy reaches the database from the event loop.
        service_client = ServiceClient.objects.select_related("application", "account", "tenant").get(
            pk=service_client.pk
        )
        return service_client, secret

    return make


@pytest.fixture
def service_client(committed):
    """Make a service client where the server sees it: ``service_client(tenant_slug=..., role=...)``."""

    def make(**kwargs):
        return committed(_service_client(**kwargs))

    return make


def token_request(server, client_id: str, secret: str, **data: str) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/oauth/token/",
        data={"grant_type": "client_credentials", **data},
        auth=(client_id, secret),
        timeout=10,
    )


def api_url(server) -> str:
    return f"{server.public_url}/api"


def _write(django_db_blocker, work) -> None:
    with django_db_blocker.unblock():
        _in_own_thread(work)


async def test_a_service_client_gets_an_api_token_that_acts_as_its_account(server, service_client):
    client, secret = service_client(tenant_slug="acme")

    response = token_request(server, client.application.client_id, secret, resource=api_url(server))

    assert response.status_code == 200, response.text
    body = response.json()
    assert "refresh_token" not in body
    assert body["token_type"] == "Bearer"
    # The role's scopes that the API reads: its tokens open nothing else.
    assert body["scope"].split() == sorted(scopes_for_role(role=Role.CONTRIBUTOR) & set(API_SCOPES))
    identity = await identity_from_api_bearer(raw_token=body["access_token"])
    assert identity.user_id == client.account.pk
    assert identity.username == client.account.username
    assert (identity.tenant_slug, identity.role) == ("acme", Role.CONTRIBUTOR)
    assert identity.client_id == client.application.client_id
    assert "llm:invoke" in identity.scopes


async def test_the_token_opens_no_mcp_session(server, service_client):
    client, secret = service_client(tenant_slug="acme")
    token = token_request(server, client.application.client_id, secret).json()["access_token"]

    async with httpx.AsyncClient(timeout=10) as http:
        headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
        response = await http.post(server.mcp_url, json=initialize_body(), headers=headers)

    assert response.status_code == 401
    with pytest.raises(AuthenticationFailed, match=TOKEN_WRONG_RESOURCE):
        await identity_from_bearer(raw_token=token, session_id=None)


async def test_without_a_resource_the_token_is_for_the_api(server, service_client):
    client, secret = service_client(tenant_slug="acme")

    response = token_request(server, client.application.client_id, secret)

    assert response.status_code == 200, response.text
    identity = await identity_from_api_bearer(raw_token=response.json()["access_token"])
    assert identity.tenant_slug == "acme"


@pytest.mark.parametrize("resource", ["mcp", "elsewhere"])
def test_a_token_for_any_other_resource_is_refused(server, service_client, resource):
    client, secret = service_client(tenant_slug="acme")
    uri = server.resource_url if resource == "mcp" else "https://elsewhere.example/api"

    response = token_request(server, client.application.client_id, secret, resource=uri)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    assert "API only" in response.json()["error_description"]


@pytest.mark.parametrize(
    "resource",
    [
        "not a uri",
        "/api",
        "javascript:alert(1)",
        "https://x.example/" + "a" * 10_000,
        "http://127.0.0.1/api#f",
    ],
    ids=["words", "relative", "javascript", "huge", "fragment"],
)
def test_a_malformed_resource_is_refused(server, service_client, resource):
    client, secret = service_client(tenant_slug="acme")

    response = token_request(server, client.application.client_id, secret, resource=resource)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


def test_both_resources_at_once_are_refused(server, service_client):
    client, secret = service_client(tenant_slug="acme")

    response = httpx.post(
        f"{server.base_url}/oauth/token/",
        content=(f"grant_type=client_credentials&resource={api_url(server)}&resource={server.resource_url}"),
        headers={"content-type": "application/x-www-form-urlencoded"},
        auth=(client.application.client_id, secret),
        timeout=10,
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


async def test_the_scopes_are_what_was_asked_within_the_role(server, service_client):
    client, secret = service_client(tenant_slug="acme")

    response = token_request(server, client.application.client_id, secret, scope="llm:invoke")

    assert response.status_code == 200, response.text
    assert response.json()["scope"] == "llm:invoke"
    identity = await identity_from_api_bearer(raw_token=response.json()["access_token"])
    assert identity.scopes == frozenset({"llm:invoke"})


def test_a_viewer_service_client_asking_for_llm_invoke_is_refused(server, service_client):
    client, secret = service_client(tenant_slug="acme", role=Role.VIEWER)

    response = token_request(server, client.application.client_id, secret, scope="llm:invoke")

    assert response.status_code == 400
    assert response.json() == {"error": "invalid_scope", "error_description": ROLE_GRANTS_NO_SCOPE}


def test_an_unknown_scope_is_refused(server, service_client):
    client, secret = service_client(tenant_slug="acme")

    response = token_request(server, client.application.client_id, secret, scope="root:everything")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_scope"


def test_a_confidential_client_that_is_no_service_client_is_refused(server, committed):
    application = committed(
        ApplicationFactory,
        client_type="confidential",
        authorization_grant_type="client-credentials",
        client_secret="s3cret-of-a-plain-client",
        redirect_uris="",
    )

    response = token_request(server, application.client_id, "s3cret-of-a-plain-client")

    assert response.status_code == 400
    assert response.json() == {"error": "unauthorized_client", "error_description": NOT_A_SERVICE_CLIENT}


def test_an_authorization_code_client_cannot_use_the_grant(server, committed):
    application = committed(
        ApplicationFactory, client_type="confidential", client_secret="s3cret-of-a-code-client"
    )

    response = token_request(server, application.client_id, "s3cret-of-a-code-client")

    assert response.status_code == 400
    assert response.json() == {"error": "unauthorized_client"}


@pytest.mark.parametrize("secret", ["wrong-secret", "", "é" * 300], ids=["wrong", "empty", "long"])
def test_a_wrong_secret_is_refused(server, service_client, secret):
    client, _ = service_client(tenant_slug="acme")

    response = token_request(server, client.application.client_id, secret)

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def basic(credentials: bytes) -> dict[str, str]:
    return {"authorization": f"Basic {base64.b64encode(credentials).decode()}"}


@pytest.mark.parametrize("credentials", [b"no-such-client:x", b"x" * 5000 + b":x"], ids=["unknown", "huge"])
def test_an_unknown_client_id_is_refused(server, credentials):
    response = httpx.post(
        f"{server.base_url}/oauth/token/",
        data={"grant_type": "client_credentials"},
        headers=basic(credentials),
        timeout=10,
    )

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


@pytest.mark.parametrize(
    "credentials",
    [b"no-such\x00client:x", b"\xff\xfe\xed:x", b"\xed\xa0\x80:x", b"client:se\x00cret"],
    ids=["nul", "invalid-utf8", "surrogate", "nul-secret"],
)
def test_unreadable_credentials_are_refused_before_any_lookup(server, credentials):
    # oauth.parameter_guard answers these before the token view: nothing reaches the database.
    response = httpx.post(
        f"{server.base_url}/oauth/token/",
        data={"grant_type": "client_credentials"},
        headers=basic(credentials),
        timeout=10,
    )

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"


def test_a_deactivated_tenant_gets_no_token(server, committed, service_client, django_db_blocker):
    tenant = committed(TenantFactory)
    client, secret = service_client(tenant_slug=tenant.slug)
    _write(django_db_blocker, lambda: Tenant.objects.filter(pk=tenant.pk).update(is_active=False))

    response = token_request(server, client.application.client_id, secret)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid_grant", "error_description": TENANT_INACTIVE}


async def test_a_removed_membership_ends_the_client(server, service_client, django_db_blocker):
    client, secret = service_client(tenant_slug="acme")
    token = token_request(server, client.application.client_id, secret).json()["access_token"]
    _write(django_db_blocker, lambda: Membership.objects.filter(user_id=client.account_id).delete())

    response = token_request(server, client.application.client_id, secret)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid_grant", "error_description": NOT_A_MEMBER}
    with pytest.raises(AuthenticationFailed, match=TOKEN_NOT_MEMBER):
        await identity_from_api_bearer(raw_token=token)


def test_a_deactivated_account_gets_no_token(server, service_client, django_db_blocker):
    client, secret = service_client(tenant_slug="acme")
    _write(django_db_blocker, lambda: User.objects.filter(pk=client.account_id).update(is_active=False))

    response = token_request(server, client.application.client_id, secret)

    assert response.status_code == 400
    assert response.json() == {"error": "invalid_grant", "error_description": ACCOUNT_INACTIVE}


async def test_each_tenants_client_resolves_to_its_own_tenant_only(server, service_client):
    acme_client, acme_secret = service_client(tenant_slug="acme")
    globex_client, globex_secret = service_client(tenant_slug="globex")

    acme_token = token_request(server, acme_client.application.client_id, acme_secret).json()
    globex_token = token_request(server, globex_client.application.client_id, globex_secret).json()

    acme = await identity_from_api_bearer(raw_token=acme_token["access_token"])
    globex = await identity_from_api_bearer(raw_token=globex_token["access_token"])
    assert (acme.tenant_slug, acme.user_id) == ("acme", acme_client.account_id)
    assert (globex.tenant_slug, globex.user_id) == ("globex", globex_client.account_id)
    # One client's id with the other's secret is no way in.
    crossed = token_request(server, acme_client.application.client_id, globex_secret)
    assert crossed.status_code == 401


async def test_a_deleted_service_client_loses_its_tokens(server, service_client, django_db_blocker):
    client, secret = service_client(tenant_slug="acme")
    token = token_request(server, client.application.client_id, secret).json()["access_token"]
    _write(
        django_db_blocker,
        lambda: service_client_delete(service_client=ServiceClient.objects.get(pk=client.pk)),
    )

    with pytest.raises(AuthenticationFailed, match=TOKEN_UNKNOWN):
        await identity_from_api_bearer(raw_token=token)
    assert token_request(server, client.application.client_id, secret).status_code == 401


async def test_issued_and_refused_tokens_are_audited(server, service_client, django_db_blocker):
    client, secret = service_client(tenant_slug="acme")
    token_request(server, client.application.client_id, secret)
    token_request(server, client.application.client_id, secret, resource=server.resource_url)

    rows = [
        row
        async for row in AuditEvent.objects.filter(
            action=AuditAction.TOKEN_ISSUED, application_id=client.application.pk
        ).order_by("pk")
    ]

    assert [row.outcome for row in rows] == [AuditOutcome.OK, AuditOutcome.ERROR]
    issued, refused = rows
    assert issued.user_id == client.account_id
    assert issued.tenant_id == client.tenant_id
    assert issued.detail["grant_type"] == "client_credentials"
    assert refused.detail["error"] == "invalid_target"
    assert secret not in str(issued.detail) + str(refused.detail)


async def test_a_tenant_admin_makes_one_in_the_console_and_it_gets_a_token(server, committed, browser):
    # committed: the rows the server makes are removed after the test like any other.
    page = await browser.open("/console/acme/clients/", username="alice", password=Person("alice").password)
    assert page.status_code == 200, page.text[:500]
    form = parse_form(page.text, action="/console/acme/clients/create/")
    created = await browser.client.post(
        "/console/acme/clients/create/",
        data={**form["fields"], "name": "Portal-made job", "role": "contributor"},
    )
    assert created.status_code == 200, created.text[:500]
    client_id = re.search(r'<code id="client-id"[^>]*>([^<]+)</code>', created.text)
    secret = re.search(r'<code id="client-secret"[^>]*>([^<]+)</code>', created.text)
    assert client_id is not None
    assert secret is not None

    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{server.base_url}/oauth/token/",
            data={"grant_type": "client_credentials", "resource": api_url(server)},
            auth=(client_id.group(1), secret.group(1)),
        )

    assert response.status_code == 200, response.text
    identity = await identity_from_api_bearer(raw_token=response.json()["access_token"])
    assert (identity.tenant_slug, identity.role) == ("acme", Role.CONTRIBUTOR)
    assert identity.username.startswith("svc-acme-")
