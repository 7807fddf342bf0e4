"""The console's service clients section: the tenant's admins create one (its secret shown once, on
the answer to that request only) and delete one, each audited with who; a viewer sees the list
without forms and cannot post; another tenant's client is never found; hostile input gets the
form's own message, never a 500.

The token side of a service client is tests/e2e/oauth/test_client_credentials.py."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.hashers import check_password
from django.test import Client

from accounts.models import Membership, Role, User
from core.models import AuditAction, AuditEvent
from oauth.models import ServiceClient
from oauth.service_clients import NAME_TOO_LONG, SERVICE_CLIENT_NOT_FOUND, service_client_create
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def outsider_tenant():
    return TenantFactory.create(slug="other-tenant", name="Other")


def _url(tenant, action=""):
    return f"/console/{tenant.slug}/clients/{action}"


def _secret(html: str) -> str:
    found = re.search(r'<code id="client-secret"[^>]*>([^<]+)</code>', html)
    assert found is not None
    return found.group(1)


def test_the_page_lists_only_this_tenants_clients_with_their_roles(client, tenant, ada, outsider_tenant):
    mine, _ = service_client_create(tenant=tenant, name="Nightly report", role="viewer")
    theirs, _ = service_client_create(tenant=outsider_tenant, name="Their job", role="viewer")

    page = client.get(_url(tenant)).content.decode()

    assert "<bdi>Nightly report</bdi>" in page
    assert mine.application.client_id in page
    assert '<td data-label="Role">viewer</td>' in page
    assert "Their job" not in page
    assert theirs.application.client_id not in page


def test_creating_one_shows_its_secret_once_on_a_never_cached_answer(client, tenant, ada):
    response = client.post(_url(tenant, "create/"), {"name": "Backend", "role": "contributor"})

    assert response.status_code == 200
    html = response.content.decode()
    created = ServiceClient.objects.get()
    secret = _secret(html)
    assert check_password(secret, created.application.client_secret)
    assert created.application.client_id in html
    assert "grant_type=client_credentials" in html
    # In its own field only: the token request reads it from the terminal, not an argument.
    assert html.count(secret) == 1
    assert "curl -s -K -" in html
    assert "no-store" in response.headers["Cache-Control"]
    assert created.tenant == tenant
    assert created.created_by == ada
    assert Membership.objects.get(user=created.account).role == "contributor"


def test_the_list_never_shows_a_secret_again(client, tenant, ada):
    secret = _secret(
        client.post(_url(tenant, "create/"), {"name": "Backend", "role": "viewer"}).content.decode()
    )

    page = client.get(_url(tenant)).content.decode()

    assert "Backend" in page
    assert secret not in page
    assert 'id="client-secret"' not in page


def test_creating_one_is_audited_with_who_and_never_the_secret(client, tenant, ada):
    secret = _secret(
        client.post(_url(tenant, "create/"), {"name": "Backend", "role": "viewer"}).content.decode()
    )

    row = AuditEvent.objects.get(action=AuditAction.CLIENT_REGISTERED)

    assert (row.user, row.tenant, row.target) == (ada, tenant, "Backend")
    assert secret not in str(row.detail)


def test_deleting_one_removes_it_and_its_account_audited_with_who(client, tenant, ada):
    created, _ = service_client_create(tenant=tenant, name="Backend", role="viewer")

    response = client.post(_url(tenant, "delete/"), {"client_id": created.application.client_id}, follow=True)

    assert response.redirect_chain == [(_url(tenant), 302)]
    assert "Backend was deleted" in response.content.decode()
    assert not ServiceClient.objects.exists()
    assert not User.objects.filter(pk=created.account_id).exists()
    row = AuditEvent.objects.get(action=AuditAction.CLIENT_DELETED)
    assert (row.user, row.tenant, row.target) == (ada, tenant, "Backend")


def test_another_tenants_client_is_not_found(client, tenant, ada, outsider_tenant):
    theirs, _ = service_client_create(tenant=outsider_tenant, name="Their job", role="viewer")

    response = client.post(_url(tenant, "delete/"), {"client_id": theirs.application.client_id})

    assert response.status_code == 404
    assert SERVICE_CLIENT_NOT_FOUND in response.content.decode()
    assert ServiceClient.objects.filter(pk=theirs.pk).exists()


def test_another_tenants_console_is_not_found(client, tenant, ada, outsider_tenant):
    response = client.post(_url(outsider_tenant, "create/"), {"name": "Sneaky", "role": "admin"})

    assert response.status_code == 404
    assert not ServiceClient.objects.exists()


@pytest.mark.parametrize("client_id", ["", "missing", "x" * 5000, "-1"])
def test_an_unknown_client_id_is_not_found(client, tenant, ada, client_id):
    assert client.post(_url(tenant, "delete/"), {"client_id": client_id}).status_code == 404


def test_a_viewer_sees_the_list_without_forms(client, tenant, vic):
    service_client_create(tenant=tenant, name="Nightly report", role="viewer")

    page = client.get(_url(tenant)).content.decode()

    assert "Nightly report" in page
    assert f'action="/console/{tenant.slug}/clients/' not in page
    assert "Only the tenant&#x27;s admins change this" in page


def test_a_viewers_posts_are_refused_and_change_nothing(client, tenant, vic):
    existing, _ = service_client_create(tenant=tenant, name="Nightly report", role="viewer")

    created = client.post(_url(tenant, "create/"), {"name": "Sneaky", "role": "admin"})
    deleted = client.post(_url(tenant, "delete/"), {"client_id": existing.application.client_id})

    assert (created.status_code, deleted.status_code) == (403, 403)
    assert list(ServiceClient.objects.values_list("pk", flat=True)) == [existing.pk]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("name=job%00name&role=viewer", 400, "NUL"),
        ("name=job%FFname&role=viewer", 400, "not valid UTF-8"),
        ("name=" + "x" * 101 + "&role=viewer", 422, NAME_TOO_LONG),
        ("name=++&role=viewer", 422, "needs a name"),
        ("name=Job%E2%80%AEtxt&role=viewer", 422, "The name"),
        ("name=Job&role=owner", 422, "role must be one of"),
        ("name=%3Cscript%3Ealert(1)%3C%2Fscript%3E&role=owner", 422, "role must be one of"),
    ],
    ids=["nul", "invalid-utf8", "overlong", "blank", "bidi", "role", "markup"],
)
def test_hostile_input_is_the_forms_own_message(client, tenant, ada, body, status, message):
    response = client.post(_url(tenant, "create/"), body, content_type="application/x-www-form-urlencoded")

    assert response.status_code == status
    html = response.content.decode()
    assert message in html
    assert "<script>" not in html
    assert not ServiceClient.objects.exists()


def test_a_post_without_the_csrf_token_is_refused(tenant, ada):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)

    response = strict.post(_url(tenant, "create/"), {"name": "Job", "role": "viewer"})

    assert response.status_code == 403
    assert not ServiceClient.objects.exists()


def test_the_page_costs_a_bounded_number_of_queries(client, tenant, ada, django_assert_max_num_queries):
    for n in range(8):
        service_client_create(tenant=tenant, name=f"Job {n}", role=Role.VIEWER)
    people = [UserFactory.create(username=f"person-{n}") for n in range(3)]
    for person in people:
        MembershipFactory.create(user=person, tenant=tenant, role=Role.VIEWER)

    with django_assert_max_num_queries(6):
        response = client.get(_url(tenant))

    assert response.status_code == 200
    assert response.content.decode().count('data-label="Role"') == 8
