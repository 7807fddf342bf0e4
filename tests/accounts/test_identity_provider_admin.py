"""Operators configure a tenant's identity provider in the admin: the client secret is write-only
and stored encrypted, the domains and role map are checked line by line, hostile input is a form
error; a tenant that requires its provider refuses its members' passwords."""

from __future__ import annotations

import pytest

from accounts.models import IdentityProvider, Role
from accounts.sign_in.admin import DOMAIN_INVALID, ISSUER_NOT_HTTPS
from core.crypto import secret_decrypt
from portal.login import PROVIDER_REQUIRED
from tests.support.admin_support import admin_url
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

SECRET = "idp-client-secret-never-shown-4f1e"


def _form(tenant, **overrides: object) -> dict[str, object]:
    return {
        "tenant": tenant.pk,
        "name": "Acme SSO",
        "issuer": "https://sso.acme.test/realms/acme/",
        "client_id": "gatehouse",
        "client_secret": SECRET,
        "email_domains_text": "acme.test, Acme.Example  acme.test",
        "role_claim": "realm_access.roles",
        "role_map_text": "gh-admins = admin\n# readers\ngh-readers = viewer",
        "default_role": "",
        "enabled": "on",
        **overrides,
    }


def test_an_operator_adds_a_provider_and_the_secret_is_stored_encrypted(client, operator, tenant):
    response = client.post(admin_url(IdentityProvider, "add"), _form(tenant))

    assert response.status_code == 302, response.context["adminform"].form.errors
    provider = IdentityProvider.objects.get()
    assert provider.issuer == "https://sso.acme.test/realms/acme"
    assert provider.email_domains == ["acme.test", "acme.example"]
    assert provider.role_map == {"gh-admins": "admin", "gh-readers": "viewer"}
    assert SECRET not in provider.client_secret_encrypted
    assert secret_decrypt(token=provider.client_secret_encrypted) == SECRET
    page = client.get(admin_url(IdentityProvider, "change", provider.pk)).content.decode()
    assert SECRET not in page
    assert "gh-admins = admin" in page
    # Saved again with the secret left blank: the stored one stays.
    client.post(admin_url(IdentityProvider, "change", provider.pk), _form(tenant, client_secret=""))
    provider.refresh_from_db()
    assert secret_decrypt(token=provider.client_secret_encrypted) == SECRET


@pytest.mark.parametrize(
    ("field", "value", "form_field"),
    [
        ("issuer", "http://sso.acme.test", "issuer"),
        ("issuer", "https://sso.acme.test/?tenant=x", "issuer"),
        ("issuer", "https://sso.acme.test/\x00", "issuer"),
        ("issuer", "javascript:alert(1)", "issuer"),
        ("email_domains_text", "acme.test, not a domain!", "email_domains_text"),
        ("email_domains_text", "acme\u202e.test", "email_domains_text"),
        ("email_domains_text", "acme\u200b.test", "email_domains_text"),
        ("email_domains_text", "@acme.test", "email_domains_text"),
        ("role_map_text", "gh-admins = owner", "role_map_text"),
        ("role_map_text", "gh-admins admin", "role_map_text"),
        ("role_map_text", "gh\x00 = admin", "role_map_text"),
        ("role_map_text", "x = admin\n" * 3000, "role_map_text"),
        ("role_claim", "groups; DROP", "role_claim"),
        ("role_claim", "realm_access..roles", "role_claim"),
        ("client_secret", "s" * 1001, "client_secret"),
        ("name", "n" * 101, "name"),
    ],
    ids=range(16),
)
def test_hostile_input_is_a_form_error_on_its_field(client, operator, tenant, field, value, form_field):
    response = client.post(admin_url(IdentityProvider, "add"), _form(tenant, **{field: value}))

    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == [form_field]
    assert SECRET not in response.content.decode()
    assert not IdentityProvider.objects.exists()


def test_the_messages_name_what_is_wrong(client, operator, tenant):
    issuer = client.post(admin_url(IdentityProvider, "add"), _form(tenant, issuer="http://sso.acme.test"))
    domain = client.post(admin_url(IdentityProvider, "add"), _form(tenant, email_domains_text="a.test b"))
    assert issuer.context["adminform"].form.errors["issuer"] == [ISSUER_NOT_HTTPS]
    assert domain.context["adminform"].form.errors["email_domains_text"] == [
        DOMAIN_INVALID.format(domain="b")
    ]


def test_a_provider_on_this_machine_may_speak_http(client, operator, tenant):
    response = client.post(admin_url(IdentityProvider, "add"), _form(tenant, issuer="http://127.0.0.1:9000"))
    assert response.status_code == 302


# A tenant that requires its provider


@pytest.fixture
def required(tenant) -> IdentityProvider:
    return IdentityProvider.objects.create(
        tenant=tenant, name="Acme SSO", issuer="https://sso.acme.test", client_id="gatehouse", required=True
    )


def test_a_member_of_a_tenant_that_requires_its_provider_cannot_use_a_password(client, tenant, required):
    member = MembershipFactory.create(
        user=UserFactory.create(username="ada"), tenant=tenant, role=Role.ADMIN
    ).user

    response = client.post("/accounts/login/", {"username": "ada", "password": DEFAULT_PASSWORD})

    assert response.status_code == 200
    assert response.context["form"].errors["__all__"] == [
        PROVIDER_REQUIRED.format(tenant=tenant.name, provider="Acme SSO")
    ]
    assert PROVIDER_REQUIRED.format(tenant=tenant.name, provider="Acme SSO") in response.content.decode()
    assert "did not match" not in response.content.decode()
    assert "_auth_user_id" not in client.session
    required.required = False
    required.save()
    assert (
        client.post("/accounts/login/", {"username": "ada", "password": DEFAULT_PASSWORD}).status_code == 302
    )
    assert client.session["_auth_user_id"] == str(member.pk)


def test_an_operator_keeps_their_password(client, tenant, required):
    operator = UserFactory.create(username="root", is_staff=True, is_superuser=True)
    MembershipFactory.create(user=operator, tenant=tenant, role=Role.ADMIN)
    response = client.post("/admin/login/", {"username": "root", "password": DEFAULT_PASSWORD})
    assert response.status_code == 302
