"""Operators manage OAuth clients, tokens and MCP sessions in the admin without seeing a secret."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import Application

from core.models import AuditEvent
from mcp_gateway.models import McpSession, TerminationReason
from oauth.models import AccessToken, RefreshToken
from tests.support.admin_support import admin_url, post_action
from tests.support.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    GrantFactory,
    McpSessionFactory,
    RefreshTokenFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


# OAuth applications and tokens


def test_the_application_page_never_shows_the_client_secret(client, operator):
    application = ApplicationFactory.create(
        client_type=Application.CLIENT_CONFIDENTIAL, client_secret="plain-secret-value-1234567890"
    )
    application.refresh_from_db()
    assert application.client_secret.startswith("pbkdf2")
    page = client.get(reverse("admin:oauth2_provider_application_change", args=[application.pk]))
    content = page.content.decode()
    assert "plain-secret-value" not in content
    assert application.client_secret not in content
    assert 'name="client_secret"' not in content
    assert "Stored hashed" in content


def test_an_unhashed_client_secret_is_not_shown_either(client, operator):
    application = ApplicationFactory.create(
        client_type=Application.CLIENT_CONFIDENTIAL,
        client_secret="legacy-plain-secret-0987654321",
        hash_client_secret=False,
    )
    page = client.get(reverse("admin:oauth2_provider_application_change", args=[application.pk]))
    assert "legacy-plain-secret" not in page.content.decode()


def test_the_application_list_shows_and_filters_the_registration_source(client, operator):
    ApplicationFactory.create(name="by-hand")
    ApplicationFactory.create(name="self-registered", registration_source="dcr")
    response = client.get(
        reverse("admin:oauth2_provider_application_changelist"), {"registration_source__exact": "dcr"}
    )
    names = [application.name for application in response.context["cl"].result_list]
    assert names == ["self-registered"]
    assert "Dynamic Client Registration" in response.content.decode()


def test_editing_an_application_keeps_its_secret_and_source(client, operator):
    application = ApplicationFactory.create(
        client_type=Application.CLIENT_CONFIDENTIAL, client_secret="s" * 30
    )
    application.refresh_from_db()
    stored = application.client_secret
    response = client.post(
        reverse("admin:oauth2_provider_application_change", args=[application.pk]),
        {
            "client_id": application.client_id,
            "user": "",
            "redirect_uris": application.redirect_uris,
            "post_logout_redirect_uris": "",
            "client_type": application.client_type,
            "authorization_grant_type": application.authorization_grant_type,
            "hash_client_secret": "on",
            "name": "renamed",
            "algorithm": "",
            "allowed_origins": "",
            "registration_source": "dcr",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    application.refresh_from_db()
    assert application.name == "renamed"
    assert application.client_secret == stored
    assert application.registration_source == "manual"


@pytest.mark.parametrize("factory", [AccessTokenFactory, RefreshTokenFactory, GrantFactory])
def test_token_pages_show_only_the_last_characters_of_a_credential(client, operator, factory):
    obj = factory()
    secret = getattr(obj, "token", None) or obj.code
    model = type(obj)
    for url in (admin_url(model, "changelist"), admin_url(model, "change", obj.pk)):
        content = client.get(url).content.decode()
        assert secret not in content
        assert secret[:-4] not in content
        assert f"…{secret[-4:]}" in content


def test_revoking_an_access_token_revokes_its_refresh_token_and_audits_both(client, operator):
    refresh = RefreshTokenFactory.create()
    access = refresh.access_token
    response = post_action(client, AccessToken, "revoke_tokens", [access])
    assert "Revoked 1 access token(s) and 1 refresh token(s)." in response.content.decode()
    assert not AccessToken.objects.filter(pk=access.pk).exists()
    refresh.refresh_from_db()
    assert refresh.revoked is not None
    events = {e.detail["kind"]: e for e in AuditEvent.objects.filter(action="token.revoked")}
    assert set(events) == {"access", "refresh"}
    assert events["access"].target == f"AccessToken #{access.pk}"
    assert events["refresh"].target == f"RefreshToken #{refresh.pk}"
    for event in events.values():
        assert event.detail["by"] == "operator"
        assert event.detail["operator"] == "operator"
        assert event.user == access.user
        assert event.tenant == access.tenant
        assert event.application == access.application


def test_revoking_an_access_token_without_a_refresh_token_deletes_it(client, operator):
    access = AccessTokenFactory.create()
    post_action(client, AccessToken, "revoke_tokens", [access])
    assert not AccessToken.objects.filter(pk=access.pk).exists()
    event = AuditEvent.objects.get(action="token.revoked")
    assert event.detail == {"by": "operator", "operator": "operator", "kind": "access"}


def test_revoking_a_refresh_token_twice_audits_it_once(client, operator):
    refresh = RefreshTokenFactory.create()
    post_action(client, RefreshToken, "revoke_tokens", [refresh])
    response = post_action(client, RefreshToken, "revoke_tokens", [refresh])
    assert "Revoked 0 access token(s) and 0 refresh token(s)." in response.content.decode()
    assert AuditEvent.objects.filter(action="token.revoked", detail__kind="refresh").count() == 1
    assert AuditEvent.objects.filter(action="token.revoked", detail__kind="access").count() == 1


def test_staff_who_may_only_view_tokens_cannot_revoke_them(client):
    access = AccessTokenFactory.create()
    viewer = UserFactory.create(username="auditor", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_accesstoken"))
    client.force_login(viewer)
    assert client.get(admin_url(AccessToken, "changelist")).status_code == 200
    post_action(client, AccessToken, "revoke_tokens", [access])
    assert AccessToken.objects.filter(pk=access.pk).exists()
    assert not AuditEvent.objects.exists()


# MCP sessions


def test_terminating_sessions_ends_only_the_live_ones(client, operator):
    live = McpSessionFactory.create()
    ended = McpSessionFactory.create(
        terminated_at=timezone.now(), termination_reason=TerminationReason.CLIENT
    )
    response = post_action(client, McpSession, "terminate", [live, ended])
    assert "Terminated 1 session(s)." in response.content.decode()
    live.refresh_from_db()
    ended.refresh_from_db()
    assert live.termination_reason == TerminationReason.OPERATOR
    assert ended.termination_reason == TerminationReason.CLIENT


def test_the_live_filter_lists_only_live_sessions(client, operator):
    live = McpSessionFactory.create()
    McpSessionFactory.create(terminated_at=timezone.now(), termination_reason=TerminationReason.CLIENT)
    response = client.get(admin_url(McpSession, "changelist"), {"state": "live"})
    assert [s.pk for s in response.context["cl"].result_list] == [live.pk]


def test_staff_who_may_only_view_sessions_cannot_terminate_them(client):
    session = McpSessionFactory.create()
    viewer = UserFactory.create(username="auditor", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_mcpsession"))
    client.force_login(viewer)
    post_action(client, McpSession, "terminate", [session])
    session.refresh_from_db()
    assert session.terminated_at is None
