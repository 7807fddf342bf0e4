"""``manage.py end_access``: an operator cuts a person off at once (tokens in every tenant, MCP
sessions, signed-in browsers, and with ``--deactivate`` the account), one audit row saying what
ended; nobody else's access is touched."""

from __future__ import annotations

import pytest
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.test import Client

from accounts.models import User
from core.models import AuditAction, AuditEvent
from mcp_gateway.models import McpSession
from oauth.models import AccessToken
from tests.support.factories import (
    AccessTokenFactory,
    McpSessionFactory,
    MembershipFactory,
    RefreshTokenFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def _signed_in_browser(user: User) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_everything_the_person_holds_ends_and_nobody_elses(capsys):
    ada = MembershipFactory.create(user=UserFactory.create(username="ada"))
    bob = MembershipFactory.create(user=UserFactory.create(username="bob"), tenant=ada.tenant)
    RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=ada))
    AccessTokenFactory.create(membership=MembershipFactory.create(user=ada.user))
    McpSessionFactory.create(user=ada.user, tenant=ada.tenant)
    bobs_token = AccessTokenFactory.create(membership=bob)
    bobs_session = McpSessionFactory.create(user=bob.user, tenant=bob.tenant)
    adas_browser, bobs_browser = _signed_in_browser(ada.user), _signed_in_browser(bob.user)

    call_command("end_access", "ada", "--deactivate")

    assert capsys.readouterr().out.strip() == (
        "Ended ada's access: 2 access token(s), 1 refresh token(s), 1 MCP session(s), 1 browser "
        "session(s). The account is turned off."
    )
    assert list(AccessToken.objects.all()) == [bobs_token]
    assert McpSession.objects.get(user=ada.user).terminated_at is not None
    assert McpSession.objects.get(pk=bobs_session.pk).terminated_at is None
    assert not Session.objects.filter(pk=adas_browser.session.session_key).exists()
    assert Session.objects.filter(pk=bobs_browser.session.session_key).exists()
    assert not User.objects.get(username="ada").is_active
    [row] = AuditEvent.objects.filter(action=AuditAction.ACCESS_ENDED)
    assert row.user == ada.user
    assert row.detail["browser_sessions"] == 1
    assert row.detail["deactivated"] is True


def test_without_deactivate_the_account_stays_and_a_second_run_ends_nothing(capsys):
    UserFactory.create(username="ada")
    call_command("end_access", "ada")
    call_command("end_access", "ada")
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "Ended ada's access: 0 access token(s), 0 refresh token(s), 0 MCP session(s), 0 browser session(s)."
    )
    assert User.objects.get(username="ada").is_active


@pytest.mark.parametrize("username", ["nobody", "ada\x00", "\ud800"])
def test_an_unknown_or_unusable_username_is_a_clear_error(username):
    with pytest.raises(CommandError, match="No user"):
        call_command("end_access", username)
