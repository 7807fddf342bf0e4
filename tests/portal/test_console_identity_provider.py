"""The console's sign-in section (portal/console/identity_provider.py): a tenant's admin sees the
tenant's identity provider (the secret only as stored or not) and changes it with the admin's own
checks, each change audited without the secret; a change that would lock the admin out is refused
with what to do first; a new issuer forgets who people were at the old one; a viewer sees the
settings without the form and cannot post; hostile input is the form's own message; a tenant
without a provider is told how to get one."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from accounts.models import ExternalIdentity, IdentityProvider, Role
from accounts.sign_in.forms import CLAIM_INVALID, ISSUER_HAS_QUERY, ISSUER_NOT_HTTPS
from accounts.sign_in.provider_settings import NO_PROVIDER
from core.crypto import secret_decrypt, secret_encrypt
from core.models import AuditAction, AuditEvent
from oauth.parameter_guard import PARAMETER_HAS_NUL, PARAMETER_NOT_UTF8
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

FORM = "application/x-www-form-urlencoded"
STORED_SECRET = "stored-secret-0123456789"
NEW_SECRET = "typed-secret-abcdefghijkl"
ISSUER = "https://sso.acme.test/realms/acme"


def _url(tenant, action=""):
    return f"/console/{tenant.slug}/identity-provider/{action}"


def _text(response) -> str:
    return html.unescape(response.content.decode())


def _words(response) -> str:
    """The page's words as a person reads them: no markup, one space between words."""
    return " ".join(re.sub("<[^>]+>", " ", _text(response)).split())


@pytest.fixture
def provider(tenant):
    return IdentityProvider.objects.create(
        tenant=tenant,
        name="Acme SSO",
        issuer=ISSUER,
        client_id="gatehouse",
        client_secret_encrypted=secret_encrypt(plaintext=STORED_SECRET),
        email_domains=["acme.test"],
        role_claim="groups",
        role_map={"gh-admins": "admin"},
        default_role="viewer",
    )


def _post(**overrides):
    return {
        "name": "Acme SSO",
        "issuer": ISSUER,
        "client_id": "gatehouse",
        "client_secret": "",
        "role_claim": "groups",
        "role_map_text": "gh-admins = admin",
        "default_role": "viewer",
        "enabled": "on",
        **overrides,
    }


def _linked(person, provider, subject="s-1"):
    return ExternalIdentity.objects.create(provider=provider, subject=subject, user=person)


# The page


def test_the_page_shows_the_settings_and_only_whether_a_secret_is_stored(client, tenant, ada, provider):
    page = client.get(_url(tenant)).content.decode()

    assert ISSUER in page
    assert "<code>gatehouse</code>" in page
    assert '<dd id="secret-status">Stored</dd>' in page
    assert STORED_SECRET not in page
    assert provider.client_secret_encrypted not in page
    assert "<code>gh-admins</code> → admin" in page
    assert "<code>acme.test</code>" in page
    assert 'name="client_secret"' in page


def test_a_tenant_without_a_provider_is_told_how_to_get_one(client, tenant, ada):
    response = client.get(_url(tenant))
    page = _words(response)

    assert "it has no identity provider" in page
    assert "ask an operator of this Gatehouse to add the provider in the admin" in page
    assert "/accounts/sso/callback/" in page
    assert 'name="client_secret"' not in response.content.decode()


def test_saving_for_a_tenant_without_a_provider_is_not_found(client, tenant, ada):
    response = client.post(_url(tenant, "save/"), _post())

    assert response.status_code == 404
    assert NO_PROVIDER.format(tenant=tenant.name) in _text(response)
    assert not IdentityProvider.objects.exists()


# Changes


def test_an_admin_changes_the_settings_and_the_audit_row_names_what_changed(client, tenant, ada, provider):
    response = client.post(
        _url(tenant, "save/"),
        _post(name="Acme Okta", role_map_text="gh-admins = admin\ngh-users = contributor", default_role=""),
        follow=True,
    )

    provider.refresh_from_db()
    assert (provider.name, provider.role_map, provider.default_role) == (
        "Acme Okta",
        {"gh-admins": "admin", "gh-users": "contributor"},
        "",
    )
    assert "saved: name, role map, default role" in _text(response)
    event = AuditEvent.objects.get(action=AuditAction.IDENTITY_PROVIDER_CHANGED)
    assert (event.user, event.tenant, event.detail["fields"]) == (
        ada,
        tenant,
        ["name", "role_map", "default_role"],
    )
    assert event.detail["changes"]["name"] == {"from": "Acme SSO", "to": "Acme Okta"}
    assert event.detail["role_map"] == {"from": 1, "to": 2}


def test_a_new_secret_is_stored_encrypted_and_never_shown_or_audited(client, tenant, ada, provider):
    response = client.post(_url(tenant, "save/"), _post(client_secret=NEW_SECRET), follow=True)

    provider.refresh_from_db()
    assert secret_decrypt(token=provider.client_secret_encrypted) == NEW_SECRET
    assert NEW_SECRET not in response.content.decode()
    event = AuditEvent.objects.get(action=AuditAction.IDENTITY_PROVIDER_CHANGED)
    assert event.detail["fields"] == ["client_secret"]
    assert NEW_SECRET not in str(event.detail)
    assert STORED_SECRET not in str(event.detail)


def test_a_blank_secret_keeps_the_stored_one_and_the_same_values_change_nothing(
    client, tenant, ada, provider
):
    stored = provider.client_secret_encrypted

    response = client.post(_url(tenant, "save/"), _post(), follow=True)

    provider.refresh_from_db()
    assert provider.client_secret_encrypted == stored
    assert "Nothing changed." in _text(response)
    assert not AuditEvent.objects.filter(action=AuditAction.IDENTITY_PROVIDER_CHANGED).exists()


def test_a_refused_form_never_echoes_the_typed_secret(client, tenant, ada, provider):
    response = client.post(
        _url(tenant, "save/"), _post(issuer="http://sso.acme.test", client_secret=NEW_SECRET)
    )

    assert response.status_code == 422
    assert NEW_SECRET not in response.content.decode()
    provider.refresh_from_db()
    assert secret_decrypt(token=provider.client_secret_encrypted) == STORED_SECRET


def test_a_new_issuer_forgets_who_people_were_at_the_old_one(client, tenant, ada, provider):
    other = UserFactory.create(username="grace")
    _linked(other, provider)

    response = client.post(
        _url(tenant, "save/"), _post(issuer="https://acme.okta.test/oauth2/default"), follow=True
    )

    provider.refresh_from_db()
    assert provider.issuer == "https://acme.okta.test/oauth2/default"
    assert not ExternalIdentity.objects.filter(provider=provider).exists()
    assert "1 person will be linked again at their next sign-in" in _text(response)
    event = AuditEvent.objects.get(action=AuditAction.IDENTITY_PROVIDER_CHANGED)
    assert (event.detail["unlinked"], event.detail["changes"]["issuer"]["to"]) == (
        1,
        "https://acme.okta.test/oauth2/default",
    )


# Lock-out guards


def test_requiring_the_provider_is_refused_to_an_admin_who_never_signed_in_through_it(
    client, tenant, ada, provider
):
    response = client.post(_url(tenant, "save/"), _post(required="on"))

    assert response.status_code == 422
    assert "Sign in through Acme SSO yourself first" in _text(response)
    provider.refresh_from_db()
    assert not provider.required
    assert not AuditEvent.objects.filter(action=AuditAction.IDENTITY_PROVIDER_CHANGED).exists()


def test_an_admin_who_signed_in_through_the_provider_may_require_it(client, tenant, ada, provider):
    _linked(ada, provider)

    response = client.post(_url(tenant, "save/"), _post(required="on"))

    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.required


def test_a_new_issuer_while_required_is_refused_because_it_would_unlink_the_admin(
    client, tenant, ada, provider
):
    _linked(ada, provider)
    IdentityProvider.objects.filter(pk=provider.pk).update(required=True)

    response = client.post(_url(tenant, "save/"), _post(required="on", issuer="https://other.example"))

    assert response.status_code == 422
    assert "at the new issuer" in _text(response)
    provider.refresh_from_db()
    assert provider.issuer == ISSUER
    assert ExternalIdentity.objects.filter(user=ada).exists()


def test_an_admin_without_a_password_cannot_switch_their_only_way_in_off(client, tenant, ada, provider):
    ada.set_unusable_password()
    ada.save()
    client.force_login(ada)  # a changed password ends the session
    _linked(ada, provider)

    response = client.post(_url(tenant, "save/"), {k: v for k, v in _post().items() if k != "enabled"})

    assert response.status_code == 422
    assert "switching it off would lock you out" in _text(response)
    provider.refresh_from_db()
    assert provider.enabled


# Hostile input


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "Acme\u202eOSS", "invisible or control character (U+202E)"),
        ("client_id", "gate\u200bhouse", "invisible or control character (U+200B)"),
        ("issuer", "http://sso.acme.test", ISSUER_NOT_HTTPS),
        ("issuer", "https://sso.acme.test/?x=1", ISSUER_HAS_QUERY),
        ("issuer", "https://sso.acme.test/" + "a" * 100_000, "at most 500 characters"),
        ("name", "n" * 100_000, "at most 100 characters"),
        ("client_secret", "s" * 100_000, "at most 1000 characters"),
        ("role_claim", "groups; drop", CLAIM_INVALID),
        ("role_map_text", "gh-admins = owner", "'owner' is not a role"),
        ("default_role", "owner", "Select a valid choice"),
    ],
    ids=[
        "bidi-name",
        "zero-width-client-id",
        "http",
        "query",
        "huge-issuer",
        "huge-name",
        "huge-secret",
        "claim",
        "role-map",
        "default-role",
    ],
)
def test_hostile_input_is_the_forms_own_message(client, tenant, ada, provider, field, value, message):
    response = client.post(_url(tenant, "save/"), _post(**{field: value}))

    assert response.status_code == 422
    assert message in _text(response)
    assert '<ul class="errorlist"' in response.content.decode()
    provider.refresh_from_db()
    assert (provider.name, provider.issuer, provider.client_id) == ("Acme SSO", ISSUER, "gatehouse")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("name=Acme%00SSO", PARAMETER_HAS_NUL.format(name="'name'")),
        ("client_id=%ED%A0%80", PARAMETER_NOT_UTF8.format(name="'client_id'")),
        ("role_map_text=a%FF%3Dadmin", PARAMETER_NOT_UTF8.format(name="'role_map_text'")),
    ],
    ids=["nul", "surrogate", "invalid-utf8"],
)
def test_a_nul_or_invalid_utf8_is_refused_with_the_reason(client, tenant, ada, provider, body, message):
    response = client.post(_url(tenant, "save/"), f"issuer={ISSUER}&{body}", content_type=FORM)

    assert response.status_code == 400
    assert message in _text(response)
    provider.refresh_from_db()
    assert provider.name == "Acme SSO"


# Viewers, other tenants


def test_a_viewer_sees_the_settings_without_the_form_and_cannot_post(client, tenant, provider, vic):
    page = _text(client.get(_url(tenant)))
    posted = client.post(_url(tenant, "save/"), _post(name="Sneaky"))

    assert ISSUER in page
    assert 'name="client_secret"' not in page
    assert "Only the tenant's admins change this" in page
    assert posted.status_code == 403
    provider.refresh_from_db()
    assert provider.name == "Acme SSO"


def test_another_tenants_provider_is_not_found(client, tenant, ada):
    other = TenantFactory.create(slug="other-tenant", name="Other")
    MembershipFactory.create(user=UserFactory.create(username="olga"), tenant=other, role=Role.ADMIN)
    theirs = IdentityProvider.objects.create(tenant=other, name="Other SSO", issuer=ISSUER, client_id="x")

    shown = client.get(_url(other))
    posted = client.post(_url(other, "save/"), _post(name="Mine now"))

    assert (shown.status_code, posted.status_code) == (404, 404)
    assert "Other SSO" not in shown.content.decode()
    theirs.refresh_from_db()
    assert theirs.name == "Other SSO"


def test_a_post_without_the_csrf_token_is_refused(tenant, ada, provider):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)

    assert strict.post(_url(tenant, "save/"), _post(name="Renamed")).status_code == 403
    provider.refresh_from_db()
    assert provider.name == "Acme SSO"


def test_the_page_has_no_inline_script_or_style(client, tenant, ada, provider):
    text = client.get(_url(tenant)).content.decode()

    assert " style=" not in text
    assert "<script" not in text
    assert re.search(r"<style(?! nonce=)", text) is None


def test_the_page_takes_a_bounded_number_of_queries(
    client, tenant, ada, provider, django_assert_max_num_queries
):
    for n in range(20):
        _linked(UserFactory.create(username=f"person-{n}"), provider, subject=f"s-{n}")

    # session, person, their memberships, the provider, people linked, whether you are
    with django_assert_max_num_queries(6):
        response = client.get(_url(tenant))

    assert "<dt>People linked</dt><dd>20</dd>" in response.content.decode()
