"""``manage.py mcp_token``: an operator issues a short-lived, tenant-bound, audited access token for
a member, stored hashed, from a first-party client no browser can use (``oauth.cli_tokens``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.utils import timezone
from oauth2_provider.models import Application

from accounts.models import Role
from accounts.scopes import SCOPE_READ, SCOPE_WRITE, scopes_for_role
from core.models import AuditAction, AuditEvent
from oauth.cli_tokens import (
    CLI_CLIENT_ID,
    CLI_CLIENT_NAME,
    CLI_TOKEN_DEFAULT_MINUTES,
    CLI_TOKEN_MAX_MINUTES,
)
from oauth.models import AccessToken
from oauth.selectors import access_token_find
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, TenantFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def contributor():
    return MembershipFactory(role=Role.CONTRIBUTOR, user__username="cora", tenant__slug="initech")


@pytest.fixture
def viewer():
    return MembershipFactory(role=Role.VIEWER, user__username="vic", tenant__slug="initech")


def _row(token: str) -> AccessToken:
    row = access_token_find(token=token)
    assert row is not None
    return row


def _issue(capsys, *args: str) -> tuple[str, str]:
    call_command("mcp_token", *args)
    captured = capsys.readouterr()
    return captured.out.strip(), captured.err


def test_it_prints_only_the_token_and_stores_only_its_checksum(capsys, contributor):
    token, err = _issue(capsys, "cora", "--tenant", "initech")

    row = access_token_find(token=token)
    assert row is not None
    assert row.token == ""
    assert token not in err
    assert AccessToken.objects.filter(token=token).count() == 0


def test_the_token_is_bound_to_the_person_the_tenant_and_the_mcp_resource(capsys, contributor):
    token, err = _issue(capsys, "cora", "--tenant", "initech")

    row = access_token_find(token=token)
    assert row is not None
    assert (row.user, row.tenant) == (contributor.user, contributor.tenant)
    assert row.resource == [settings.MCP_RESOURCE_URL]
    assert settings.MCP_RESOURCE_URL in err


def test_scopes_default_to_what_the_role_allows(capsys, viewer):
    token, _ = _issue(capsys, "vic", "--tenant", "initech")

    row = access_token_find(token=token)
    assert row is not None
    assert set(row.scope.split()) == scopes_for_role(role=Role.VIEWER)
    assert SCOPE_WRITE not in row.scope.split()


def test_scopes_may_be_narrowed_space_or_comma_separated(capsys, contributor):
    spaced, _ = _issue(capsys, "cora", "--tenant", "initech", "--scopes", SCOPE_READ)
    commas, _ = _issue(capsys, "cora", "--tenant", "initech", "--scopes", f"{SCOPE_READ},{SCOPE_WRITE}")

    assert _row(spaced).scope == SCOPE_READ
    assert _row(commas).scope.split() == [SCOPE_READ, SCOPE_WRITE]


def test_a_scope_beyond_the_role_is_refused(viewer):
    with pytest.raises(CommandError, match=r"role 'viewer' does not allow mcp:write"):
        call_command("mcp_token", "vic", "--tenant", "initech", "--scopes", SCOPE_READ, SCOPE_WRITE)
    assert not AccessToken.objects.exists()


def test_an_unknown_scope_is_refused(contributor):
    with pytest.raises(CommandError, match=r"Unknown scope\(s\): admin:everything"):
        call_command("mcp_token", "cora", "--tenant", "initech", "--scopes", "admin:everything")
    assert not AccessToken.objects.exists()


def test_an_empty_scope_list_is_refused(contributor):
    with pytest.raises(CommandError, match="No scopes to grant"):
        call_command("mcp_token", "cora", "--tenant", "initech", "--scopes", " , ")


def test_it_lives_an_hour_by_default(capsys, contributor):
    before = timezone.now()
    token, _ = _issue(capsys, "cora", "--tenant", "initech")
    after = timezone.now()

    expires = _row(token).expires
    lifetime = timedelta(minutes=CLI_TOKEN_DEFAULT_MINUTES)
    assert before + lifetime <= expires <= after + lifetime


def test_minutes_set_its_life_within_the_bound(capsys, contributor):
    before = timezone.now()
    token, _ = _issue(capsys, "cora", "--tenant", "initech", "--minutes", str(CLI_TOKEN_MAX_MINUTES))
    assert _row(token).expires >= before + timedelta(minutes=CLI_TOKEN_MAX_MINUTES)


@pytest.mark.parametrize("minutes", ["0", "-5", str(CLI_TOKEN_MAX_MINUTES + 1)])
def test_a_life_outside_the_bound_is_refused(contributor, minutes):
    with pytest.raises(CommandError, match="must be between 1 and 1440 minutes"):
        call_command("mcp_token", "cora", "--tenant", "initech", "--minutes", minutes)
    assert not AccessToken.objects.exists()


def test_it_is_audited_as_token_issued_without_the_token(capsys, contributor):
    token, _ = _issue(capsys, "cora", "--tenant", "initech", "--scopes", SCOPE_READ)

    event = AuditEvent.objects.get(action=AuditAction.TOKEN_ISSUED)
    row = access_token_find(token=token)
    assert event.user_id == contributor.user_id
    assert event.tenant_id == contributor.tenant_id
    assert event.application is not None
    assert event.application.client_id == CLI_CLIENT_ID
    assert event.target == str(row)
    assert event.detail["scopes"] == [SCOPE_READ]
    assert event.detail["grant_type"] == "operator-command"
    assert token not in str(event.detail)


def test_the_cli_client_is_made_once_confidential_and_without_redirect_uris(capsys, contributor):
    _issue(capsys, "cora", "--tenant", "initech")
    _issue(capsys, "cora", "--tenant", "initech")

    application = Application.objects.get(client_id=CLI_CLIENT_ID)
    assert application.name == CLI_CLIENT_NAME
    assert application.client_type == Application.CLIENT_CONFIDENTIAL
    assert application.redirect_uris == ""
    assert AccessToken.objects.filter(application=application).count() == 2
    assert AuditEvent.objects.filter(action=AuditAction.CLIENT_REGISTERED).count() == 1


def test_no_browser_can_be_sent_to_authorize_the_cli_client(client, capsys, contributor):
    _issue(capsys, "cora", "--tenant", "initech")
    client.login(username="cora", password=DEFAULT_PASSWORD)

    response = client.get(
        "/oauth/authorize/",
        {
            "response_type": "code",
            "client_id": CLI_CLIENT_ID,
            "redirect_uri": "http://127.0.0.1:9/callback",
            "scope": SCOPE_READ,
            "code_challenge": "x" * 43,
            "code_challenge_method": "S256",
        },
    )
    assert response.status_code == 400
    assert "location" not in response.headers


def test_no_one_can_present_the_cli_client_at_the_token_endpoint(client, capsys, contributor):
    _issue(capsys, "cora", "--tenant", "initech")
    response = client.post(
        "/oauth/token/",
        {"grant_type": "authorization_code", "code": "anything", "client_id": CLI_CLIENT_ID},
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_revoke_tokens_revokes_a_cli_token(capsys, contributor):
    token, _ = _issue(capsys, "cora", "--tenant", "initech")
    call_command("revoke_tokens", "cora")
    assert access_token_find(token=token) is None


def test_an_unknown_user_is_refused():
    TenantFactory(slug="initech")
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("mcp_token", "nobody", "--tenant", "initech")


def test_an_unknown_tenant_is_refused(contributor):
    with pytest.raises(CommandError, match="No tenant 'nowhere'"):
        call_command("mcp_token", "cora", "--tenant", "nowhere")


def test_a_person_of_another_tenant_is_refused(contributor):
    MembershipFactory(user__username="olga", tenant__slug="globex", role=Role.ADMIN)
    with pytest.raises(CommandError, match="'olga' is not a member of tenant 'initech'"):
        call_command("mcp_token", "olga", "--tenant", "initech")
    assert not AccessToken.objects.exists()


def test_a_deactivated_tenant_is_refused(contributor):
    contributor.tenant.is_active = False
    contributor.tenant.save()
    with pytest.raises(CommandError, match="Tenant 'initech' is deactivated"):
        call_command("mcp_token", "cora", "--tenant", "initech")


def test_a_deactivated_person_is_refused(contributor):
    contributor.user.is_active = False
    contributor.user.save()
    with pytest.raises(CommandError, match="User 'cora' is deactivated"):
        call_command("mcp_token", "cora", "--tenant", "initech")


def test_the_tenant_option_is_required(contributor):
    with pytest.raises(CommandError, match="--tenant"):
        call_command("mcp_token", "cora")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["co\x00ra", "--tenant", "initech"], "username"),
        (["cora", "--tenant", "init\x00ech"], "tenant"),
        (["cora", "--tenant", "initech", "--scopes", "mcp:read\x00"], "scope"),
        (["co\udcffra", "--tenant", "initech"], "username"),
    ],
)
def test_unstorable_characters_are_refused_with_a_message(contributor, args, field):
    with pytest.raises(CommandError, match=f"The {field} contains"):
        call_command("mcp_token", *args)
    assert not AccessToken.objects.exists()
