"""Enterprise-managed authorization at the token endpoint: an identity assertion (ID-JAG) from a
tenant's identity provider, exchanged with the JWT bearer grant for an MCP access token. The
provider is a real local HTTP server (``tests/support/assertion_issuer.py``) whose keys Gatehouse
fetches; every refusal is ``invalid_grant`` (or the client errors RFC 6749 names), audited, and
issues nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import Application

from accounts.models import ExternalIdentity, IdentityProvider, Membership, Role
from core.models import AuditAction, AuditEvent
from oauth.identity_assertion import keys
from oauth.identity_assertion.grant import ID_JAG_PROFILE, JWT_BEARER
from oauth.identity_assertion.keys import provider_keys_forget
from oauth.identity_assertion.verify import LEEWAY_SECONDS
from oauth.models import AccessToken, IdentityAssertionUse, RefreshToken
from tests.support.assertion_issuer import AssertionIssuer, signing_key
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

SECRET = "confidential-client-secret-7a1c"
TOKEN = "/oauth/token/"


@pytest.fixture
def issuer() -> Iterator[AssertionIssuer]:
    provider_keys_forget()
    with AssertionIssuer() as running:
        yield running
    provider_keys_forget()


@pytest.fixture
def provider(tenant, issuer) -> IdentityProvider:
    return IdentityProvider.objects.create(
        tenant=tenant,
        name="Acme SSO",
        issuer=issuer.issuer,
        client_id="gatehouse",
        role_map={"gh-admins": "admin", "gh-readers": "viewer"},
        accepts_identity_assertions=True,
    )


@pytest.fixture
def agent() -> Application:
    """A confidential MCP client provisioned for enterprise-managed authorization."""
    return Application.objects.create(
        name="Enterprise agent",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=SECRET,
    )


def _claims(agent: Application, **overrides: object) -> dict[str, Any]:
    return {
        "sub": "dana-1",
        "aud": settings.PUBLIC_URL,
        "client_id": agent.client_id,
        "resource": settings.MCP_RESOURCE_URL,
        "groups": ["gh-readers"],
        "email": "dana@acme.test",
        "email_verified": True,
        **overrides,
    }


def _exchange(client, agent: Application, assertion: str, **extra: str):
    data = {
        "grant_type": JWT_BEARER,
        "assertion": assertion,
        "client_id": agent.client_id,
        "client_secret": SECRET,
        "resource": settings.MCP_RESOURCE_URL,
        **extra,
    }
    response = client.post(TOKEN, data)
    return response, json.loads(response.content)


def _refused(response, body, *, error: str = "invalid_grant", contains: str = "") -> None:
    assert response.status_code in {400, 401}, body
    assert body["error"] == error, body
    assert contains in body.get("error_description", ""), body
    assert not AccessToken.objects.exists()


def test_an_assertion_becomes_an_mcp_token_for_the_person_with_their_roles_scopes(
    client, provider, agent, issuer
):
    response, body = _exchange(client, agent, issuer.issue(**_claims(agent)))

    assert response.status_code == 200, body
    assert "refresh_token" not in body
    assert "mcp:read" in body["scope"].split()
    assert "mcp:write" not in body["scope"].split()  # a viewer's
    token = AccessToken.objects.select_related("user", "tenant").get()
    assert token.tenant == provider.tenant
    assert token.resource == [settings.MCP_RESOURCE_URL]
    assert token.application == agent
    identity = ExternalIdentity.objects.get(provider=provider, subject="dana-1")
    assert token.user == identity.user
    assert Membership.objects.get(user=token.user, tenant=provider.tenant).role == Role.VIEWER
    assert not RefreshToken.objects.exists()
    [issued] = AuditEvent.objects.filter(action=AuditAction.TOKEN_ISSUED)
    assert issued.detail["grant_type"] == JWT_BEARER


def test_a_known_person_without_the_role_claim_keeps_their_role_and_asks_for_less(
    client, provider, agent, issuer
):
    member = MembershipFactory.create(tenant=provider.tenant, role=Role.ADMIN)
    ExternalIdentity.objects.create(provider=provider, subject="ada-1", user=member.user)
    assertion = issuer.issue(**_claims(agent, sub="ada-1", groups=None))

    response, body = _exchange(client, agent, assertion, scope="mcp:read")

    assert response.status_code == 200, body
    assert body["scope"] == "mcp:read"
    assert AccessToken.objects.get().user == member.user


def test_discovery_says_the_grant_and_its_profile_are_taken(client):
    metadata = client.get("/.well-known/oauth-authorization-server").json()
    assert JWT_BEARER in metadata["grant_types_supported"]
    assert metadata["authorization_grant_profiles_supported"] == [ID_JAG_PROFILE]


@pytest.mark.parametrize(
    ("case", "contains"),
    [
        ("forged signature", "signature"),
        ("wrong audience", "aud"),
        ("expired", "expired"),
        ("lives too long", "longer than"),
        ("issued in the future", "iat"),
        ("another client", "another client"),
        ("no typ", "typ"),
        ("no jti", "jti"),
        ("no sub", "sub"),
        ("another resource", "resource"),
        ("the API as resource", "resource"),
        ("unknown issuer", "not trusted"),
    ],
)
def test_a_bad_assertion_is_invalid_grant_naming_the_check(client, provider, agent, issuer, case, contains):
    claims = _claims(agent)
    kwargs: dict[str, Any] = {}
    if case == "forged signature":
        kwargs["key"] = signing_key()
        kwargs["header"] = {"kid": issuer.key.kid}
    elif case == "wrong audience":
        claims["aud"] = "https://another-gateway.example"
    elif case == "expired":
        kwargs["lifetime"] = -120
    elif case == "lives too long":
        kwargs["lifetime"] = 3600
    elif case == "issued in the future":
        claims["iat"] = 4_000_000_000
        claims["exp"] = 4_000_000_100
    elif case == "another client":
        claims["client_id"] = "someone-else"
    elif case == "no typ":
        kwargs["header"] = {"typ": "JWT"}
    elif case == "no jti":
        claims["jti"] = None
    elif case == "no sub":
        claims["sub"] = None
    elif case == "another resource":
        claims["resource"] = "https://elsewhere.example/mcp"
    elif case == "the API as resource":
        claims["resource"] = settings.API_RESOURCE_URL
    else:
        claims["iss"] = "https://unknown-idp.example"
    response, body = _exchange(client, agent, issuer.issue(**claims, **kwargs))
    _refused(response, body, contains=contains)
    [row] = AuditEvent.objects.filter(action=AuditAction.TOKEN_ISSUED)
    assert row.detail["error"] == "invalid_grant"


def test_an_assertion_is_exchanged_once(client, provider, agent, issuer):
    assertion = issuer.issue(**_claims(agent))
    assert _exchange(client, agent, assertion)[0].status_code == 200
    response, body = _exchange(client, agent, assertion)
    assert response.status_code == 400
    assert body == {"error": "invalid_grant", "error_description": "This assertion was already exchanged."}
    assert AccessToken.objects.count() == 1


def test_an_exchange_forgets_the_jtis_of_assertions_no_longer_accepted(client, provider, agent, issuer):
    gone = IdentityAssertionUse.objects.create(
        provider=provider, jti="long-expired", expires=timezone.now() - timedelta(seconds=1)
    )
    expires = int(time.time()) + 300
    assert _exchange(client, agent, issuer.issue(**_claims(agent, exp=expires)))[0].status_code == 200
    [kept] = IdentityAssertionUse.objects.all()
    assert kept.pk != gone.pk
    # Kept until the assertion could no longer be accepted, the verifier's leeway included.
    assert kept.expires.timestamp() == expires + LEEWAY_SECONDS


def test_another_tenants_provider_reaches_none_of_this_tenants_people(client, provider, agent, issuer):
    """globex's provider asserts acme's person by their subject at acme's provider: to globex's
    provider that subject is nobody, and its role claim could only ever make a globex member."""
    acme_person = MembershipFactory.create(tenant=provider.tenant, role=Role.ADMIN).user
    ExternalIdentity.objects.create(provider=provider, subject="dana-1", user=acme_person)
    with AssertionIssuer() as globex_idp:
        IdentityProvider.objects.create(
            tenant=TenantFactory.create(slug="globex-test"),
            name="Globex SSO",
            issuer=globex_idp.issuer,
            client_id="gatehouse",
            accepts_identity_assertions=True,
        )
        response, body = _exchange(client, agent, globex_idp.issue(**_claims(agent, groups=None)))
        _refused(response, body, contains="has not signed in to this tenant")
        # Signed by globex's key but claiming acme's issuer: the signature is checked with acme's keys.
        forged = globex_idp.issue(**_claims(agent, iss=issuer.issuer), header={"kid": issuer.key.kid})
        response, body = _exchange(client, agent, forged)
        _refused(response, body, contains="signature")


def test_a_provider_that_does_not_accept_assertions_or_is_off_is_not_trusted(client, provider, agent, issuer):
    IdentityProvider.objects.filter(pk=provider.pk).update(accepts_identity_assertions=False)
    _refused(*_exchange(client, agent, issuer.issue(**_claims(agent))), contains="not trusted")
    IdentityProvider.objects.filter(pk=provider.pk).update(accepts_identity_assertions=True, enabled=False)
    _refused(*_exchange(client, agent, issuer.issue(**_claims(agent))), contains="not trusted")


def test_rotated_keys_are_fetched_again_but_not_at_every_unknown_key_id(
    client, provider, agent, issuer, monkeypatch
):
    assert _exchange(client, agent, issuer.issue(**_claims(agent)))[0].status_code == 200
    issuer.rotate()
    fetched = issuer.requests
    # Within REFETCH_MIN_SECONDS of the last fetch, an unknown key id fetches nothing.
    response, body = _exchange(client, agent, issuer.issue(**_claims(agent)))
    assert (response.status_code, body["error"]) == (400, "invalid_grant")
    assert "signature" in body["error_description"]
    assert issuer.requests == fetched
    monkeypatch.setattr(keys, "REFETCH_MIN_SECONDS", 0)
    response, body = _exchange(client, agent, issuer.issue(**_claims(agent)))
    assert response.status_code == 200, body
    assert issuer.requests == fetched + 2  # discovery and JWKS, once


def test_a_public_client_or_a_wrong_secret_cannot_present_one(client, provider, agent, issuer):
    public = Application.objects.create(
        name="Public", client_type=Application.CLIENT_PUBLIC, authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1:9/cb",
    )  # fmt: skip
    data = {
        "grant_type": JWT_BEARER,
        "assertion": issuer.issue(**_claims(public)),
        "client_id": public.client_id,
    }
    body = json.loads(client.post(TOKEN, data).content)
    assert body["error"] in {"invalid_client", "unauthorized_client"}, body
    wrong = client.post(
        TOKEN,
        {"grant_type": JWT_BEARER, "assertion": issuer.issue(**_claims(agent)), "client_id": agent.client_id,
         "client_secret": "not-it"},
    )  # fmt: skip
    assert json.loads(wrong.content)["error"] == "invalid_client"
    assert not AccessToken.objects.exists()


@pytest.mark.parametrize(
    "assertion",
    ["", "not.a.jwt", "a\x00b.c.d", "x" * 100_000, "é.é.é", "eyJ9.eyJ9.", "e30.e30.e30"],
    ids=["empty", "dots", "nul", "huge", "non-ascii", "bad-json", "empty-objects"],
)
def test_hostile_assertions_are_refused_cleanly(client, provider, agent, assertion):
    response = client.post(
        TOKEN,
        {
            "grant_type": JWT_BEARER,
            "assertion": assertion,
            "client_id": agent.client_id,
            "client_secret": SECRET,
        },
    )
    assert response.status_code == 400, response.content
    assert json.loads(response.content)["error"] in {"invalid_grant", "invalid_request"}
    assert not AccessToken.objects.exists()


def test_no_mapped_role_is_refused_and_the_member_removed(client, provider, agent, issuer):
    person = UserFactory.create(username="gone")
    MembershipFactory.create(user=person, tenant=provider.tenant, role=Role.VIEWER)
    ExternalIdentity.objects.create(provider=provider, subject="gone-1", user=person)
    response, body = _exchange(client, agent, issuer.issue(**_claims(agent, sub="gone-1", groups=["left"])))
    _refused(response, body, contains="gives you no role")
    assert not Membership.objects.filter(user=person).exists()
