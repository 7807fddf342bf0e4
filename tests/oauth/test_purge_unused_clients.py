"""`manage.py purge_unused_clients`: registrations that never got a token go after N days; used
clients, young ones and the operators' own clients stay."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from oauth2_provider.models import Application
from oauth2_provider.settings import oauth2_settings

from core.models import AuditAction, AuditEvent
from oauth.management.commands.purge_unused_clients import DAYS_TOO_FEW
from tests.support.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    AuditEventFactory,
    GrantFactory,
    RefreshTokenFactory,
)

pytestmark = pytest.mark.django_db

DCR = Application.RegistrationSource.DCR
CIMD = Application.RegistrationSource.CIMD


def _registered(*, days_ago: int, source: str = DCR, **kwargs) -> Application:
    application = ApplicationFactory.create(registration_source=source, **kwargs)
    Application.objects.filter(pk=application.pk).update(created=timezone.now() - timedelta(days=days_ago))
    return application


def _registration_token(application: Application) -> None:
    # What DOT's dynamic registration gives every client: it is not a use.
    AccessTokenFactory.create(
        application=application, user=None, tenant=None, scope=oauth2_settings.DCR_REGISTRATION_SCOPE
    )


def _left() -> set[str]:
    return set(Application.objects.values_list("name", flat=True))


def test_an_old_registration_that_never_got_a_token_is_deleted(capsys):
    dcr = _registered(days_ago=31, name="never used")
    _registration_token(dcr)
    _registered(days_ago=40, source=CIMD, name="document never used", client_id="https://c.example/doc.json")

    call_command("purge_unused_clients", "--days", "30")

    assert _left() == set()
    out = capsys.readouterr().out
    assert dcr.client_id in out
    assert "https://c.example/doc.json" in out
    assert "Deleted 2 unused client(s) registered more than 30 day(s) ago." in out
    deleted = AuditEvent.objects.filter(action=AuditAction.CLIENT_DELETED)
    assert sorted(event.detail["client_id"] for event in deleted) == sorted(
        [dcr.client_id, "https://c.example/doc.json"]
    )
    assert {event.target for event in deleted} == {"never used", "document never used"}


def test_used_young_and_manual_clients_stay():
    _registered(days_ago=10, name="young")
    _registered(days_ago=400, source=Application.RegistrationSource.MANUAL, name="manual")
    GrantFactory.create(application=_registered(days_ago=60, name="has a grant"))
    AccessTokenFactory.create(application=_registered(days_ago=60, name="has a token"))
    RefreshTokenFactory.create(access_token__application=_registered(days_ago=60, name="has a refresh token"))
    old_user = _registered(days_ago=60, name="tokens cleared, audit remains")
    AuditEventFactory.create(action=AuditAction.TOKEN_ISSUED, client_id=old_user.client_id)

    call_command("purge_unused_clients", "--days", "30")

    assert _left() == {
        "young",
        "manual",
        "has a grant",
        "has a token",
        "has a refresh token",
        "tokens cleared, audit remains",
    }


def test_a_failed_token_request_does_not_count_as_a_use():
    application = _registered(days_ago=60, name="only failed")
    AuditEventFactory.create(
        action=AuditAction.TOKEN_ISSUED, outcome="error", client_id=application.client_id
    )

    call_command("purge_unused_clients", "--days", "30")

    assert _left() == set()


def test_a_dry_run_lists_and_deletes_nothing(capsys):
    application = _registered(days_ago=31, name="never used")

    call_command("purge_unused_clients", "--days", "30", "--dry-run")

    assert _left() == {"never used"}
    out = capsys.readouterr().out
    assert application.client_id in out
    assert "Would delete 1 unused client(s)" in out


def test_the_default_age_comes_from_the_setting(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "OAUTH_UNUSED_CLIENT_DAYS": 90}
    _registered(days_ago=60, name="sixty days")
    _registered(days_ago=91, name="ninety-one days")

    # The default is read when the command builds its parser, so call it after the setting changed.
    call_command("purge_unused_clients")

    assert _left() == {"sixty days"}


def test_zero_days_is_refused():
    _registered(days_ago=1, name="yesterday")

    with pytest.raises(CommandError, match=DAYS_TOO_FEW):
        call_command("purge_unused_clients", "--days", "0")

    assert _left() == {"yesterday"}
