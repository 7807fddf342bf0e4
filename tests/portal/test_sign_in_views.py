"""Sign-in through a tenant's identity provider, the views in process against a real OpenID
provider (``tests/support/oidc_op.py``): Django's test client is Gatehouse's browser, httpx the
person's at the provider. The browser test (tests/e2e/browser/) shows the same in Chromium; here
the refusals: a flow not started here or used twice, a provider that cannot be reached or names
another issuer, a person whose groups map to no role, hostile parameters."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.conf import settings
from django.utils.html import escape

from accounts.models import ExternalIdentity, IdentityProvider, Membership, Role
from accounts.sign_in.oidc import FLOW_UNKNOWN, ISSUER_MISMATCH
from core.crypto import secret_encrypt
from core.models import AuditAction, AuditEvent
from tests.support.oidc_op import OidcAccount, OidcClient, OpenIdProvider

pytestmark = pytest.mark.django_db

SECRET = "in-process-client-secret"
CALLBACK = "/accounts/sso/callback/"
DANA = OidcAccount(
    subject="dana-1", email="dana@acme.test", name="Dana", groups=("gh-admins",), email_verified=True
)


@pytest.fixture(scope="module")
def op(tmp_path_factory) -> Iterator[OpenIdProvider]:
    client = OidcClient(
        client_id="gatehouse", client_secret=SECRET, redirect_uris=(f"{settings.PUBLIC_URL}{CALLBACK}",)
    )
    with OpenIdProvider(clients=[client], accounts=[DANA], workdir=tmp_path_factory.mktemp("op")) as provider:
        yield provider


@pytest.fixture
def provider(tenant, op) -> IdentityProvider:
    op.set_accounts([DANA])
    return IdentityProvider.objects.create(
        tenant=tenant,
        name="Acme SSO",
        issuer=op.issuer,
        client_id="gatehouse",
        client_secret_encrypted=secret_encrypt(plaintext=SECRET),
        email_domains=["acme.test"],
        role_map={"gh-admins": "admin", "gh-readers": "viewer"},
    )


def _at_the_provider(op: OpenIdProvider, location: str, *, login: str = DANA.email) -> str:
    """The person signs in at the provider; the callback path and query it sends them back with."""
    with httpx.Client(timeout=10) as http:
        back = op.sign_in(http, location, login=login)
    assert back.status_code in {302, 303}, back.text
    parts = urlsplit(back.headers["location"])
    assert parts.path == CALLBACK
    return f"{parts.path}?{parts.query}"


def _started(client, *, email: str = DANA.email, next_url: str = "") -> str:
    """The organisation form, then the page that goes on to the provider by itself."""
    page = client.post("/accounts/sso/", {"email": email, "next": next_url})
    assert page.status_code == 200, page.content.decode()[-1500:]
    continue_url = page.context["continue_url"]
    assert f'content="0;url={escape(continue_url)}"' in page.content.decode()
    response = client.get(continue_url)
    assert response.status_code == 302, response.content.decode()[-1500:]
    return response["Location"]


def test_a_person_signs_in_and_lands_where_they_were_going(client, op, provider):
    location = _started(client, next_url="/accounts/sessions/")
    query = parse_qs(urlsplit(location).query)
    assert location.startswith(f"{op.issuer}/")
    assert query["code_challenge_method"] == ["S256"]
    assert query["scope"] == ["openid email profile groups"]
    assert query["nonce"]
    assert query["state"]

    response = client.get(_at_the_provider(op, location))

    assert response.status_code == 302, response.content.decode()[-800:]
    assert response["Location"] == "/accounts/sessions/"
    dana = ExternalIdentity.objects.select_related("user").get(subject=DANA.subject).user
    assert client.session["_auth_user_id"] == str(dana.pk)
    assert Membership.objects.get(user=dana, tenant=provider.tenant).role == Role.ADMIN
    [row] = AuditEvent.objects.filter(action=AuditAction.LOGIN_SUCCEEDED, user=dana)
    assert row.detail["via"] == "identity_provider"
    assert row.tenant == provider.tenant


def test_a_callback_used_twice_or_never_started_here_is_refused(client, op, provider):
    back = _at_the_provider(op, _started(client))
    assert client.get(back).status_code == 302
    again = client.get(back)
    assert again.status_code == 403
    assert FLOW_UNKNOWN in again.content.decode()
    stranger = client.get(f"{CALLBACK}?code=x&state=never-issued")
    assert stranger.status_code == 403


def test_no_mapped_role_is_a_page_saying_so_and_signs_nobody_in(client, op, provider):
    op.set_accounts([dataclasses.replace(DANA, groups=("somewhere-else",))])
    response = client.get(_at_the_provider(op, _started(client)))
    assert response.status_code == 403
    assert "gives you no role" in response.content.decode()
    assert "_auth_user_id" not in client.session
    [row] = AuditEvent.objects.filter(action=AuditAction.LOGIN_FAILED)
    assert row.detail["reason"] == "no_role"


def test_an_offsite_next_is_replaced_by_the_home_page(client, op, provider):
    back = _at_the_provider(op, _started(client, next_url="https://evil.example/steal"))
    assert client.get(back)["Location"] == "/"


def test_a_provider_that_cannot_be_reached_is_a_page_not_a_500(client, provider):
    IdentityProvider.objects.filter(pk=provider.pk).update(issuer="http://127.0.0.1:9")
    unreachable = client.get(f"/accounts/sso/{provider.tenant.slug}/")
    assert unreachable.status_code == 503
    assert "could not be reached" in unreachable.content.decode()


def test_a_discovery_document_naming_another_issuer_is_refused(client, op, provider):
    IdentityProvider.objects.filter(pk=provider.pk).update(issuer=op.issuer.replace("127.0.0.1", "localhost"))
    response = client.get("/accounts/sso/" + provider.tenant.slug + "/")
    assert response.status_code == 503
    assert escape(ISSUER_MISMATCH.format(provider="Acme SSO")) in response.content.decode()


@pytest.mark.parametrize(
    "query",
    [
        "state=%00",
        "state=%ff%fe",
        "state=" + "s" * 10_000,
        "error=access_denied&state=x",
        "code=\u202e&state=y",
    ],
    ids=range(5),
)
def test_hostile_callback_parameters_are_a_page_not_a_500(client, provider, query):
    response = client.get(f"{CALLBACK}?{query}")
    assert response.status_code in {400, 403}


@pytest.mark.parametrize("email", ["", "not-an-email", "a@b\x00.test", "x" * 100_000 + "@acme.test"])
def test_an_unusable_email_goes_back_to_the_sign_in_page(client, provider, email):
    response = client.post("/accounts/sso/", {"email": email})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_an_unknown_tenant_link_is_a_404_page(client):
    assert client.get("/accounts/sso/nobody/").status_code == 404
