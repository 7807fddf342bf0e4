"""Remembered consent, the consent page's warnings, and a person's connected-applications and
sessions pages, in process. The same behaviours through Daphne and the SDK client are in
tests/e2e/oauth/test_consent_memory.py and tests/e2e/oauth/test_connected_apps.py."""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import Application

from accounts.models import Membership, Role
from core.models import AuditAction, AuditEvent
from mcp_gateway.models import McpSession, TerminationReason
from oauth.authorize import CONSENT_REQUIRED, LOOPBACK_WARNING, REGISTRATION_SOURCES
from oauth.consent import consent_decide, consent_forget, consent_remember
from oauth.models import AccessToken, RefreshToken, RememberedConsent
from portal.connected import BY_OWNER, NO_CONNECTION, NO_SESSION, connection_list_for_user, connection_revoke
from portal.views import DISCONNECTED, SESSION_ENDED
from tests.support.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    McpSessionFactory,
    MembershipFactory,
    RefreshTokenFactory,
    TenantFactory,
)

pytestmark = pytest.mark.django_db

READ, WRITE = "mcp:read", "mcp:write"
REDIRECT_URI = "http://127.0.0.1:9/callback"


def _remember(membership: Membership, application: Application, *scopes: str) -> RememberedConsent:
    consent_remember(user=membership.user, application=application, tenant=membership.tenant, scopes=scopes)
    return RememberedConsent.objects.get(
        user=membership.user, application=application, tenant=membership.tenant
    )


# --- the decision -------------------------------------------------------------------------------


def test_a_remembered_consent_covering_the_request_is_applied(owner):
    application = ApplicationFactory.create()
    remembered = [_remember(owner, application, READ, WRITE)]

    memory = consent_decide(requested=[READ], memberships=[owner], remembered=remembered)

    assert memory.apply == owner


def test_a_request_for_more_scopes_than_remembered_asks_again(owner):
    application = ApplicationFactory.create()
    remembered = [_remember(owner, application, READ)]

    memory = consent_decide(requested=[READ, WRITE], memberships=[owner], remembered=remembered)

    assert memory.apply is None
    assert memory.preselect_tenant_id == owner.tenant_id


def test_scopes_are_compared_after_the_role_filter(member):
    """A viewer once allowed read (write was withheld); asking for both again grants only read."""
    application = ApplicationFactory.create()
    remembered = [_remember(member, application, READ)]

    memory = consent_decide(requested=[READ, WRITE], memberships=[member], remembered=remembered)

    assert memory.apply == member


def test_a_role_that_grew_asks_again_for_what_it_now_allows(member):
    application = ApplicationFactory.create()
    remembered = [_remember(member, application, READ)]
    member.role = Role.CONTRIBUTOR

    memory = consent_decide(requested=[READ, WRITE], memberships=[member], remembered=remembered)

    assert memory.apply is None


def test_a_role_that_grants_nothing_asked_for_is_never_applied(member):
    application = ApplicationFactory.create()
    remembered = [_remember(member, application, READ, WRITE)]

    memory = consent_decide(requested=[WRITE], memberships=[member], remembered=remembered)

    assert memory.apply is None


def test_a_consent_remembered_for_a_tenant_no_longer_the_person_s_asks_again(owner, tenant):
    application = ApplicationFactory.create()
    remembered = [_remember(owner, application, READ)]
    elsewhere = MembershipFactory.create(user=owner.user, tenant=TenantFactory.create(), role=Role.ADMIN)

    memory = consent_decide(requested=[READ], memberships=[elsewhere], remembered=remembered)

    assert memory.apply is None
    assert memory.preselect_tenant_id is None


def test_with_several_tenants_the_one_remembered_tenant_is_applied(owner):
    application = ApplicationFactory.create()
    other = MembershipFactory.create(user=owner.user, tenant=TenantFactory.create(), role=Role.ADMIN)
    remembered = [_remember(other, application, READ)]

    memory = consent_decide(requested=[READ], memberships=[owner, other], remembered=remembered)

    assert memory.apply == other


def test_two_fitting_remembered_tenants_ask_again_with_the_latest_preselected(owner):
    application = ApplicationFactory.create()
    other = MembershipFactory.create(user=owner.user, tenant=TenantFactory.create(), role=Role.ADMIN)
    _remember(owner, application, READ)
    _remember(other, application, READ)

    remembered = list(RememberedConsent.objects.filter(user=owner.user).order_by("-updated"))
    memory = consent_decide(requested=[READ], memberships=[owner, other], remembered=remembered)

    assert memory.apply is None
    assert memory.preselect_tenant_id == other.tenant_id


def test_remembering_adds_to_what_was_allowed_before(owner):
    application = ApplicationFactory.create()
    _remember(owner, application, WRITE)

    consent = _remember(owner, application, READ)

    assert consent.scopes == "mcp:read mcp:write"
    assert RememberedConsent.objects.filter(user=owner.user).count() == 1


def test_forgetting_removes_only_that_client_and_tenant(owner):
    application, other_application = ApplicationFactory.create(), ApplicationFactory.create()
    _remember(owner, application, READ)
    _remember(owner, other_application, READ)

    assert consent_forget(user=owner.user, application=application, tenant=owner.tenant) is True
    assert consent_forget(user=owner.user, application=application, tenant=owner.tenant) is False
    assert list(RememberedConsent.objects.values_list("application", flat=True)) == [other_application.pk]


# --- the authorization endpoint --------------------------------------------------------------------


def _authorize_url(application: Application, **extra: str) -> str:
    challenge = base64.urlsafe_b64encode(hashlib.sha256(b"v" * 64).digest()).rstrip(b"=").decode()
    params = {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": f"{READ} {WRITE}",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s",
        **extra,
    }
    return f"/oauth/authorize/?{urlencode(params)}"


@pytest.fixture
def browser(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


def _query(response) -> dict[str, list[str]]:
    assert response.status_code == 302, response.content[:500]
    return parse_qs(urlsplit(response["Location"]).query)


def test_a_remembered_consent_returns_a_code_without_the_page_and_is_audited_as_remembered(browser, owner):
    application = ApplicationFactory.create()
    _remember(owner, application, READ, WRITE)

    query = _query(browser.get(_authorize_url(application)))

    assert "code" in query
    granted = AuditEvent.objects.get(action=AuditAction.CONSENT_GRANTED)
    assert granted.detail == {"scopes": [READ, WRITE], "remembered": True}
    assert granted.tenant_id == owner.tenant_id


def test_allowing_on_the_page_remembers_the_scopes_the_role_granted(member):
    application = ApplicationFactory.create()
    browser = Client()
    browser.force_login(member.user)
    page = browser.get(_authorize_url(application))
    fields = {name: value for name, value in page.context["form"].initial.items() if value}

    response = browser.post(
        page.request["PATH_INFO"] + "?" + page.request["QUERY_STRING"],
        {
            **fields,
            "tenant": member.tenant.slug,
            "allow": "Authorize",
        },
    )

    assert "code" in _query(response)
    consent = RememberedConsent.objects.get(user=member.user, application=application)
    assert (consent.tenant, consent.scopes) == (member.tenant, READ)
    granted = AuditEvent.objects.get(action=AuditAction.CONSENT_GRANTED)
    assert "remembered" not in granted.detail


def test_prompt_consent_shows_the_page_even_when_remembered(browser, owner):
    application = ApplicationFactory.create()
    _remember(owner, application, READ, WRITE)

    response = browser.get(_authorize_url(application, prompt="consent"))

    assert response.status_code == 200
    assert b'name="tenant"' in response.content


def test_prompt_none_without_a_remembered_consent_redirects_with_consent_required(browser):
    application = ApplicationFactory.create()

    query = _query(browser.get(_authorize_url(application, prompt="none")))

    assert query["error"] == ["consent_required"]
    assert query["error_description"] == [CONSENT_REQUIRED]
    assert query["state"] == ["s"]
    assert not AuditEvent.objects.filter(action=AuditAction.CONSENT_GRANTED).exists()


def test_prompt_none_with_a_remembered_consent_returns_a_code(browser, owner):
    application = ApplicationFactory.create()
    _remember(owner, application, READ, WRITE)

    assert "code" in _query(browser.get(_authorize_url(application, prompt="none")))


def test_the_page_preselects_the_remembered_tenant_when_it_asks_again(browser, owner):
    application = ApplicationFactory.create()
    other = MembershipFactory.create(
        user=owner.user, tenant=TenantFactory.create(slug="zz-other"), role=Role.ADMIN
    )
    _remember(other, application, READ)  # write is new, so the page asks

    page = browser.get(_authorize_url(application)).content.decode()

    assert 'value="zz-other" id="tenant-zz-other"' in page
    checked = page.split('id="tenant-zz-other"')[1].split(">")[0]
    assert "checked" in checked
    assert "checked" not in page.split(f'id="tenant-{owner.tenant.slug}"')[1].split(">")[0]


def test_the_page_warns_when_every_redirect_of_the_client_is_loopback(browser):
    loopback = ApplicationFactory.create(redirect_uris=f"{REDIRECT_URI} http://[::1]/cb http://localhost/cb")

    page = browser.get(_authorize_url(loopback)).content.decode()

    assert LOOPBACK_WARNING in page
    assert '<span class="host">127.0.0.1:9</span>' in page
    assert REGISTRATION_SOURCES[Application.RegistrationSource.MANUAL] in page


def test_the_page_does_not_warn_when_a_redirect_is_on_the_network(browser):
    mixed = ApplicationFactory.create(redirect_uris=f"{REDIRECT_URI} https://client.example/cb")

    page = browser.get(_authorize_url(mixed)).content.decode()

    assert LOOPBACK_WARNING not in page


# --- connected applications ------------------------------------------------------------------------


def test_connections_group_live_tokens_per_client_and_tenant(owner, outsider):
    application = ApplicationFactory.create()
    RefreshTokenFactory.create(
        access_token=AccessTokenFactory.create(membership=owner, application=application, scope=READ)
    )
    AccessTokenFactory.create(membership=owner, application=application, scope=f"{READ} {WRITE}")
    AccessTokenFactory.create(membership=outsider, application=application)

    [connection] = connection_list_for_user(user=owner.user)

    assert (connection.application, connection.tenant) == (application, owner.tenant)
    assert connection.scopes == {READ, WRITE}
    assert connection.holds_tokens
    assert not connection.remembered


def test_expired_and_revoked_tokens_are_not_connections(owner):
    AccessTokenFactory.create(membership=owner, expires=timezone.now() - timedelta(seconds=1))
    revoked = RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=owner))
    revoked.revoked = timezone.now()
    revoked.save()
    AccessToken.objects.filter(pk=revoked.access_token_id).update(expires=timezone.now() - timedelta(days=1))

    assert connection_list_for_user(user=owner.user) == []


def test_a_remembered_consent_alone_is_a_connection_holding_no_token(owner):
    application = ApplicationFactory.create()
    _remember(owner, application, READ)

    [connection] = connection_list_for_user(user=owner.user)

    assert connection.remembered
    assert not connection.holds_tokens
    assert connection.last_used is None


def test_last_used_is_the_latest_of_token_updates_and_session_activity(owner):
    token = AccessTokenFactory.create(membership=owner)
    later = timezone.now() + timedelta(minutes=5)
    McpSessionFactory.create(membership=owner, application=token.application, last_seen=later)

    [connection] = connection_list_for_user(user=owner.user)

    assert connection.last_used == later


def test_revoking_a_connection_ends_its_tokens_sessions_and_memory_and_nothing_else(owner):
    application = ApplicationFactory.create()
    refresh = RefreshTokenFactory.create(
        access_token=AccessTokenFactory.create(membership=owner, application=application)
    )
    lone = AccessTokenFactory.create(membership=owner, application=application)
    session = McpSessionFactory.create(membership=owner, application=application)
    _remember(owner, application, READ)
    other_client = AccessTokenFactory.create(membership=owner)
    other_tenant = AccessTokenFactory.create(
        membership=MembershipFactory.create(user=owner.user, tenant=TenantFactory.create()),
        application=application,
    )

    outcome = connection_revoke(user=owner.user, application=application, tenant=owner.tenant)

    assert (outcome.revoked.access, outcome.revoked.refresh) == (2, 1)
    assert outcome.sessions_ended == 1
    assert outcome.consent_forgotten
    assert not AccessToken.objects.filter(pk__in=[refresh.access_token_id, lone.pk]).exists()
    assert RefreshToken.objects.get(pk=refresh.pk).revoked is not None
    session.refresh_from_db()
    assert session.termination_reason == TerminationReason.OWNER
    assert set(AccessToken.objects.values_list("pk", flat=True)) == {other_client.pk, other_tenant.pk}
    revoked = AuditEvent.objects.filter(action=AuditAction.TOKEN_REVOKED)
    assert revoked.count() == 3
    assert {event.detail["by"] for event in revoked} == {BY_OWNER}
    ended = AuditEvent.objects.get(action=AuditAction.SESSION_TERMINATED)
    assert ended.detail == {"reason": "owner"}


# --- the pages -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/accounts/connected/", "/accounts/sessions/"])
def test_the_pages_send_a_signed_out_visitor_to_sign_in(client, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_the_connected_page_lists_the_client_tenant_and_scopes_in_words(browser, owner):
    token = AccessTokenFactory.create(membership=owner, scope=READ)

    page = browser.get("/accounts/connected/").content.decode()

    assert token.application.name in page
    assert owner.tenant.name in page
    assert "See who you are and use read-only tools" in page
    assert f'name="client_id" value="{token.application.client_id}"' in page
    assert token.token not in page


def test_disconnecting_redirects_back_with_a_notice_and_revokes(browser, owner):
    token = AccessTokenFactory.create(membership=owner)

    response = browser.post(
        "/accounts/connected/disconnect/",
        {"client_id": token.application.client_id, "tenant": owner.tenant.slug},
        follow=True,
    )

    assert response.redirect_chain == [("/accounts/connected/", 302)]
    notice = DISCONNECTED.format(application=token.application.name, tenant=owner.tenant.name)
    assert notice in response.content.decode()
    assert not AccessToken.objects.filter(pk=token.pk).exists()


def test_disconnecting_another_person_s_client_is_not_found_and_revokes_nothing(browser, outsider):
    theirs = AccessTokenFactory.create(membership=outsider)

    response = browser.post(
        "/accounts/connected/disconnect/",
        {"client_id": theirs.application.client_id, "tenant": outsider.tenant.slug},
        HTTP_ACCEPT="text/html",
    )

    assert response.status_code == 404
    assert NO_CONNECTION in response.content.decode()
    assert AccessToken.objects.filter(pk=theirs.pk).exists()


def test_disconnecting_needs_a_post_with_a_csrf_token(owner):
    token = AccessTokenFactory.create(membership=owner)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner.user)
    fields = {"client_id": token.application.client_id, "tenant": owner.tenant.slug}

    assert strict.get("/accounts/connected/disconnect/", fields).status_code == 405
    assert strict.post("/accounts/connected/disconnect/", fields).status_code == 403
    assert AccessToken.objects.filter(pk=token.pk).exists()


def test_the_sessions_page_lists_live_sessions_and_ends_one(browser, owner):
    live = McpSessionFactory.create(membership=owner, client_name="Inspector")
    McpSessionFactory.create(membership=owner, terminated_at=timezone.now())

    page = browser.get("/accounts/sessions/").content.decode()
    assert page.count('name="session"') == 1
    assert "Inspector" in page

    response = browser.post("/accounts/sessions/end/", {"session": live.pk}, follow=True)

    notice = SESSION_ENDED.format(application=live.application.name, tenant=owner.tenant.name)
    assert notice in response.content.decode()
    assert McpSession.objects.get(pk=live.pk).termination_reason == TerminationReason.OWNER


def test_ending_another_person_s_session_is_not_found(browser, outsider):
    theirs = McpSessionFactory.create(membership=outsider)

    response = browser.post("/accounts/sessions/end/", {"session": theirs.pk}, HTTP_ACCEPT="text/html")

    assert response.status_code == 404
    assert NO_SESSION in response.content.decode()
    assert McpSession.objects.get(pk=theirs.pk).terminated_at is None
