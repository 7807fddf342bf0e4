"""A tenant admin's service clients page, in process: the clients of the tenants where the person
is an admin, one created with its secret shown once on the answer, one deleted; another tenant's
client or tenant answers 404, a non-admin a clear refusal, hostile input a form error, never 500.

The token side of a service client is tests/e2e/oauth/test_client_credentials.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.hashers import check_password
from django.test import Client

from accounts.models import Membership, User
from core.models import AuditAction, AuditEvent
from oauth.models import ServiceClient
from oauth.service_clients import NAME_TOO_LONG, service_client_create
from portal.service_clients import ADMINS_ONLY, TENANT_NOT_YOURS
from tests.support.factories import MembershipFactory, TenantFactory

pytestmark = pytest.mark.django_db

PAGE = "/accounts/service-clients/"
CREATE = "/accounts/service-clients/create/"
DELETE = "/accounts/service-clients/delete/"


@pytest.fixture
def browser(owner) -> Client:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner.user)
    return browser


def _csrf(browser: Client) -> str:
    page = browser.get(PAGE)
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert match is not None
    return match.group(1)


def _post(browser: Client, url: str, data: dict[str, str]) -> Any:
    return browser.post(url, {**data, "csrfmiddlewaretoken": _csrf(browser)})


def test_the_page_lists_only_the_clients_of_my_admin_tenants(browser, owner, outsider):
    mine, _ = service_client_create(tenant=owner.tenant, name="Nightly report", role="viewer")
    theirs, _ = service_client_create(tenant=outsider.tenant, name="Their job", role="viewer")

    page = browser.get(PAGE).content.decode()

    assert "Nightly report" in page
    assert mine.application.client_id in page
    assert "Their job" not in page
    assert theirs.application.client_id not in page
    assert f'<option value="{owner.tenant.slug}"' in page
    assert outsider.tenant.slug not in page


def test_creating_one_shows_its_secret_once(browser, owner):
    response = _post(browser, CREATE, {"tenant": owner.tenant.slug, "name": "Backend", "role": "contributor"})

    assert response.status_code == 200
    html = response.content.decode()
    client = ServiceClient.objects.get()
    secret = re.search(r'<code id="client-secret"[^>]*>([^<]+)</code>', html)
    assert secret is not None
    assert check_password(secret.group(1), client.application.client_secret)
    assert client.application.client_id in html
    assert "grant_type=client_credentials" in html
    # Shown once, in its own field: the token request reads it from the terminal, not an argument.
    assert html.count(secret.group(1)) == 1
    assert "curl -s -K -" in html
    assert response.headers["Cache-Control"].startswith("max-age=0")
    assert client.created_by == owner.user
    assert Membership.objects.get(user=client.account).role == "contributor"
    # The list never shows it again.
    assert secret.group(1) not in browser.get(PAGE).content.decode()


def test_deleting_one_removes_it_and_its_account(browser, owner):
    client, _ = service_client_create(tenant=owner.tenant, name="Backend", role="viewer")

    response = _post(browser, DELETE, {"client_id": client.application.client_id})

    assert response.status_code == 302
    assert not ServiceClient.objects.exists()
    assert not User.objects.filter(pk=client.account_id).exists()
    assert AuditEvent.objects.filter(action=AuditAction.CLIENT_DELETED, user=owner.user).exists()


def test_another_tenants_client_is_not_found(browser, outsider):
    theirs, _ = service_client_create(tenant=outsider.tenant, name="Their job", role="viewer")

    response = _post(browser, DELETE, {"client_id": theirs.application.client_id})

    assert response.status_code == 404
    assert ServiceClient.objects.filter(pk=theirs.pk).exists()


@pytest.mark.parametrize("client_id", ["", "missing", "x" * 5000, "%00"])
def test_an_unknown_client_id_is_not_found(browser, client_id):
    assert _post(browser, DELETE, {"client_id": client_id}).status_code == 404


def test_a_nul_client_id_is_not_found(browser):
    token = _csrf(browser)
    response = browser.post(
        DELETE,
        f"client_id=a%00b&csrfmiddlewaretoken={token}",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 404


def test_creating_in_another_tenant_is_not_found(browser, outsider):
    response = _post(browser, CREATE, {"tenant": outsider.tenant.slug, "name": "Sneaky", "role": "admin"})

    assert response.status_code == 404
    assert TENANT_NOT_YOURS in response.content.decode()
    assert not ServiceClient.objects.exists()


def test_creating_in_a_tenant_where_i_am_only_a_viewer_is_not_found(browser, owner):
    other = TenantFactory.create()
    MembershipFactory.create(user=owner.user, tenant=other, role="viewer")

    response = _post(browser, CREATE, {"tenant": other.slug, "name": "Job", "role": "viewer"})

    assert response.status_code == 404
    assert not ServiceClient.objects.exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name=job%00name&role=viewer", "NUL"),
        ("name=" + "x" * 101 + "&role=viewer", NAME_TOO_LONG),
        ("name=++&role=viewer", "needs a name"),
        ("name=Job&role=owner", "role must be one of"),
        ("name=Job&role=admin%00", "role must be one of"),
        ("name=job%ED%A0%80%3Cscript%3E&role=owner", "role must be one of"),
    ],
    ids=["nul", "overlong", "blank", "role", "role-nul", "invalid-utf8-and-markup"],
)
def test_hostile_input_is_a_form_error(browser, owner, body, message):
    token = _csrf(browser)
    response = browser.post(
        CREATE,
        f"tenant={owner.tenant.slug}&{body}&csrfmiddlewaretoken={token}",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    assert "<script>" not in html
    assert not ServiceClient.objects.exists()


def test_a_non_admin_is_refused_clearly(member):
    browser = Client()
    browser.force_login(member.user)

    page = browser.get(PAGE)
    created = browser.post(CREATE, {"tenant": member.tenant.slug, "name": "Job", "role": "viewer"})
    deleted = browser.post(DELETE, {"client_id": "anything"})

    assert page.status_code == 403
    assert ADMINS_ONLY in page.content.decode()
    assert created.status_code == 403
    assert deleted.status_code == 403
    assert not ServiceClient.objects.exists()


def test_signed_out_visitors_are_sent_to_sign_in():
    response = Client().get(PAGE)
    assert response.status_code == 302
    assert "/accounts/login/" in response.headers["location"]


def test_a_post_without_the_csrf_token_is_refused(browser, owner):
    response = browser.post(CREATE, {"tenant": owner.tenant.slug, "name": "Job", "role": "viewer"})
    assert response.status_code == 403
    assert not ServiceClient.objects.exists()


def test_the_home_page_links_the_page_for_admins_only(owner, member):
    admin, viewer = Client(), Client()
    admin.force_login(owner.user)
    viewer.force_login(member.user)

    assert 'id="service-clients-link"' in admin.get("/").content.decode()
    assert 'id="service-clients-link"' not in viewer.get("/").content.decode()
