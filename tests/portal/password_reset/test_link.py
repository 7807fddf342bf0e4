"""Using a password reset link (portal/password_reset.py): the new password audited for its
person and disconnecting what the old one connected; expired and used links refused; malformed
links and hostile passwords answered with the invalid-link page or a form error, never a 500."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client
from django.utils.http import urlsafe_base64_encode

from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.models import AccessToken
from oauth.parameter_guard import PARAMETER_HAS_NUL
from tests.portal.password_reset.support import (
    CHOOSE,
    INVALID_LINK,
    NEW_PASSWORD,
    ask,
    emailed_link,
    link_made_ago,
    password_form_path,
    set_password,
    text,
)
from tests.support.factories import (
    DEFAULT_PASSWORD,
    AccessTokenFactory,
    McpSessionFactory,
    MembershipFactory,
    RefreshTokenFactory,
)

pytestmark = pytest.mark.django_db


def test_a_password_set_through_a_link_is_audited_for_its_person(client, grace):
    ask(client, grace.email)
    form_path = password_form_path(client, emailed_link(mail.outbox[0]))

    set_password(client, form_path)

    [row] = AuditEvent.objects.filter(action=AuditAction.PASSWORD_RESET)
    assert (row.user_id, row.username, row.outcome) == (grace.pk, "grace", AuditOutcome.OK)


def test_a_reset_disconnects_the_persons_clients_and_no_one_elses(client, grace):
    mine = MembershipFactory.create(user=grace)
    refresh = RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=mine))
    session = McpSessionFactory.create(membership=mine)
    someone_elses = AccessTokenFactory.create()
    ask(client, grace.email)

    set_password(client, password_form_path(client, emailed_link(mail.outbox[0])))

    assert list(AccessToken.objects.all()) == [someone_elses]
    refresh.refresh_from_db()
    session.refresh_from_db()
    assert refresh.revoked is not None
    assert session.terminated_at is not None
    [row] = AuditEvent.objects.filter(action=AuditAction.PASSWORD_RESET)
    assert row.detail == {"access_tokens_revoked": 1, "refresh_tokens_revoked": 1, "mcp_sessions_ended": 1}


def test_a_reset_signs_out_a_browser_signed_in_with_the_old_password(client, grace):
    elsewhere = Client()
    elsewhere.force_login(grace)
    assert elsewhere.get("/accounts/sessions/").status_code == 200
    ask(client, grace.email)

    set_password(client, password_form_path(client, emailed_link(mail.outbox[0])))

    assert elsewhere.get("/accounts/sessions/")["Location"].startswith("/accounts/login/")


# --- expired and used links ------------------------------------------------------------------------------


def test_a_link_older_than_its_life_is_refused(client, grace):
    page = client.get(link_made_ago(grace, settings.PASSWORD_RESET_TIMEOUT + 60))

    assert page.status_code == 200
    assert INVALID_LINK in text(page)
    assert "a link works for 1 hour" in text(page)


def test_a_link_within_its_life_still_opens_the_form(client, grace):
    # The guard of the test above: the same link, made a little later, works.
    opened = client.get(link_made_ago(grace, settings.PASSWORD_RESET_TIMEOUT - 60))

    assert opened.status_code == 302
    assert CHOOSE in text(client.get(opened["Location"]))


def test_a_used_link_is_refused(client, grace):
    ask(client, grace.email)
    link = emailed_link(mail.outbox[0])
    set_password(client, password_form_path(client, link))

    again = Client().get(urlsplit(link).path)

    assert again.status_code == 200
    assert INVALID_LINK in text(again)


def test_an_older_link_is_refused_once_another_has_set_the_password(client, grace):
    ask(client, grace.email)
    ask(client, grace.email)
    first, second = (emailed_link(message) for message in mail.outbox)
    set_password(client, password_form_path(client, second))

    assert INVALID_LINK in text(Client().get(urlsplit(first).path))


def test_the_form_of_a_used_link_is_refused_on_a_second_post(client, grace):
    ask(client, grace.email)
    form_path = password_form_path(client, emailed_link(mail.outbox[0]))
    set_password(client, form_path)

    again = set_password(client, form_path, "yet-another-passphrase-7")

    assert INVALID_LINK in text(again)
    grace.refresh_from_db()
    assert grace.check_password(NEW_PASSWORD)


# --- hostile input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uidb64", "token"),
    [
        ("%00", "abc-def"),
        ("%FF", "abc-def"),
        ("_w", "abc-def"),  # base64 of the byte 0xFF, no UTF-8
        ("AA", "abc-def"),  # base64 of a NUL
        ("OTk5OTk5OTk5OTk5OTk5OTk5OTk5", "abc-def"),  # a key past bigint
        ("A" * 20_000, "abc-def"),
        ("GRACE", "%00"),
        ("GRACE", "%FF-%FE"),
        ("GRACE", "\u202e" + "x" * 20),
        ("GRACE", "set-password"),  # the form's own URL, with no token in the session
    ],
    ids=["nul", "invalid-utf8", "0xff", "nul-key", "huge-key", "20k-key", "nul-token", "invalid-utf8-token",
         "bidi-token", "no-session-token"],
)  # fmt: skip
def test_a_malformed_link_shows_the_invalid_link_page(client, grace, uidb64, token):
    if uidb64 == "GRACE":
        uidb64 = urlsafe_base64_encode(str(grace.pk).encode())

    page = client.get(f"/accounts/password-reset/{uidb64}/{token}/")

    assert page.status_code == 200
    assert INVALID_LINK in text(page)


def test_a_nul_in_the_new_password_is_a_form_error(client, grace):
    ask(client, grace.email)
    form_path = password_form_path(client, emailed_link(mail.outbox[0]))

    response = client.post(
        form_path,
        data="new_password1=a%00b&new_password2=a%00b",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 400
    assert PARAMETER_HAS_NUL.format(name="'new_password1'") in text(response)
    assert CHOOSE in text(response)
    grace.refresh_from_db()
    assert grace.check_password(DEFAULT_PASSWORD)
