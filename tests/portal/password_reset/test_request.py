"""Asking for a password reset link (portal/password_reset.py), in process: the email from the
locmem backend and its link followed to a new password; the same answer whether or not an address
has an account; limits per client address and per email address; the request's audit row; hostile
addresses answered with a form error, never a 500.

In Chromium against Daphne, with the email read from the server's mail files:
tests/e2e/browser/test_password_reset_page.py."""

from __future__ import annotations

import logging
import socket
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core import mail
from django.test import Client
from django.urls import reverse

from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.parameter_guard import PARAMETER_HAS_NUL, PARAMETER_NOT_UTF8
from portal.password_reset import EMAIL_INVISIBLE_CHARACTER, PASSWORD_RESET_THROTTLED, duration_words
from tests.portal.password_reset.support import (
    CHOOSE,
    COMPLETE,
    LIMIT,
    NEW_PASSWORD,
    NOT_AN_EMAIL,
    RESET,
    SENT,
    TOO_LONG,
    ask,
    ask_raw,
    emailed_link,
    page,
    requested_rows,
    requests_from,
    set_password,
    spare_address,
    text,
)
from tests.support.factories import (
    DEFAULT_PASSWORD,
    UserFactory,
)

pytestmark = pytest.mark.django_db

# --- the whole flow ---------------------------------------------------------------------------------


def test_the_email_names_the_site_and_its_link_sets_a_new_password_that_signs_in(client, grace):
    asked = ask(client, "grace@example.com")
    assert (asked.status_code, asked["Location"]) == (302, SENT)

    [message] = mail.outbox
    assert message.to == ["grace@example.com"]
    assert message.subject == f"Reset your Gatehouse password ({urlsplit(settings.PUBLIC_URL).netloc})"
    assert f'the Gatehouse account "grace" at {settings.PUBLIC_URL}.' in message.body
    assert "The link works once and expires in 1 hour." in message.body
    link = emailed_link(message)
    assert link.startswith(f"{settings.PUBLIC_URL}/accounts/password-reset/")

    # Django moves the token into the session and off the address bar (no Referer carries it).
    opened = client.get(urlsplit(link).path)
    assert opened.status_code == 302
    form_path = opened["Location"]
    assert form_path.endswith("/set-password/")
    assert CHOOSE in text(client.get(form_path))

    done = set_password(client, form_path)
    assert (done.status_code, done["Location"]) == (302, COMPLETE)
    assert "Your password is changed" in text(client.get(COMPLETE))

    signed_in = Client().post(reverse("login"), {"username": "grace", "password": NEW_PASSWORD})
    assert signed_in.status_code == 302
    refused = Client().post(reverse("login"), {"username": "grace", "password": DEFAULT_PASSWORD})
    assert refused.status_code == 200


def test_the_link_comes_from_public_url_whatever_host_the_request_named(client, grace):
    # localhost is an allowed host, so Django serves the request; the link still names PUBLIC_URL.
    ask(client, grace.email, host="localhost")

    [message] = mail.outbox
    assert emailed_link(message).startswith(f"{settings.PUBLIC_URL}/")
    assert "localhost" not in f"{message.subject}\n{message.body}"


def test_the_sign_in_page_links_to_the_reset_page(client):
    page = text(client.get(reverse("login")))

    assert f'<a href="{RESET}">Forgot your password?</a>' in page


def test_the_pages_say_how_long_a_link_lasts(client, settings):
    settings.PASSWORD_RESET_TIMEOUT = 30 * 60

    assert "for 30 minutes" in text(client.get(SENT))


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(3600, "1 hour"), (7200, "2 hours"), (5400, "90 minutes"), (86400, "1 day"), (90, "90 seconds")],
)
def test_a_link_s_life_reads_as_words(seconds, words):
    assert duration_words(seconds) == words


# --- no account enumeration ----------------------------------------------------------------------------


def test_an_address_without_an_account_gets_the_same_answer_and_no_email(client, grace):
    known = ask(client, grace.email)
    unknown = ask(client, "nobody@example.com")

    assert (unknown.status_code, unknown["Location"]) == (known.status_code, known["Location"])
    assert page(client.get(unknown["Location"])) == page(client.get(known["Location"]))
    assert [message.to for message in mail.outbox] == [[grace.email]]


@pytest.mark.parametrize(
    "account", [{"is_active": False}, {"password": None}], ids=["inactive", "no-usable-password"]
)
def test_an_account_that_cannot_reset_gets_the_same_answer_and_no_email(client, account):
    UserFactory.create(username="henry", email="henry@example.com", **account)

    asked = ask(client, "henry@example.com")

    assert (asked.status_code, asked["Location"]) == (302, SENT)
    assert mail.outbox == []


def test_a_mail_server_that_refuses_changes_nothing_in_the_answer(client, grace, settings, caplog):
    # A refusal only for existing accounts (nothing is sent for the others) must not show as a 500.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", port, False

    with caplog.at_level(logging.ERROR, logger="django.contrib.auth"):
        asked = ask(client, grace.email)

    assert (asked.status_code, asked["Location"]) == (302, SENT)
    assert "Failed to send password reset email" in caplog.text


# --- limits ------------------------------------------------------------------------------------------


def test_one_address_asking_for_many_accounts_is_refused_with_a_retry_time(client, grace, limit_rule):
    address = spare_address()
    with requests_from(address):
        for number in range(LIMIT):
            assert ask(client, f"person-{number}@example.com").status_code == 302
        refused = ask(client, grace.email)

    assert refused.status_code == 429
    seconds = int(refused["Retry-After"])
    assert 1 <= seconds <= 3600
    assert PASSWORD_RESET_THROTTLED.format(seconds=seconds) in text(refused)
    assert mail.outbox == []


def test_many_addresses_asking_for_one_account_are_refused(client, grace, limit_rule):
    for _ in range(LIMIT):
        with requests_from(spare_address()):
            assert ask(client, grace.email).status_code == 302
    with requests_from(spare_address()):
        # The same address in other letter case and with spaces around is the same address.
        refused = ask(client, f"  {grace.email.upper()} ")

    assert refused.status_code == 429
    assert len(mail.outbox) == LIMIT


def test_an_address_refused_leaves_other_addresses_their_budget(client, grace, limit_rule):
    with requests_from(spare_address()):
        for number in range(LIMIT):
            ask(client, f"person-{number}@example.com")
        assert ask(client, grace.email).status_code == 429

    with requests_from(spare_address()):
        assert ask(client, grace.email).status_code == 302


def test_a_refusal_reads_the_same_for_an_address_with_and_without_an_account(client, grace, limit_rule):
    with requests_from(spare_address()):
        for number in range(LIMIT):
            ask(client, f"person-{number}@example.com")
        known = ask(client, grace.email)
        unknown = ask(client, "nobody@example.com")

    assert (unknown.status_code, unknown["Retry-After"]) == (known.status_code, known["Retry-After"])
    assert page(unknown).replace("nobody@example.com", "ADDRESS") == page(known).replace(
        grace.email, "ADDRESS"
    )


def test_a_refusal_is_audited_as_rate_limited_and_sends_nothing(client, grace, limit_rule):
    address = spare_address()
    with requests_from(address):
        for number in range(LIMIT):
            ask(client, f"person-{number}@example.com")
        ask(client, grace.email)

    [refusal] = AuditEvent.objects.filter(action=AuditAction.RATE_LIMITED)
    assert (refusal.outcome, refusal.ip, refusal.target) == (AuditOutcome.DENIED, address, RESET)
    assert refusal.detail["scope"] == "password_reset"
    # The refused request asked for nothing: only those let in are password.reset_requested rows.
    assert [row.detail["email"] for row in requested_rows()] == [
        f"person-{n}@example.com" for n in range(LIMIT)
    ]


# --- audit ---------------------------------------------------------------------------------------------


def test_each_request_is_audited_with_what_it_found_in_its_detail_only(client, grace):
    address = spare_address()
    with requests_from(address):
        ask(client, grace.email)
        ask(client, "nobody@example.com")

    known, unknown = requested_rows()
    # Nothing but the detail tells them apart: no user, username or tenant to find a row by.
    for row in (known, unknown):
        assert (row.user_id, row.username, row.tenant_id, row.outcome, row.ip) == (
            None, "", None, AuditOutcome.OK, address,
        )  # fmt: skip
    assert known.detail == {"email": grace.email, "accountsFound": 1}
    assert unknown.detail == {"email": "nobody@example.com", "accountsFound": 0}


# --- hostile input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("email=grace%00@example.com", 400, PARAMETER_HAS_NUL.format(name="'email'")),
        ("email=grace%FF%FE@example.com", 400, PARAMETER_NOT_UTF8.format(name="'email'")),
        ("email=grace%E2%80%AE@example.com", 200, NOT_AN_EMAIL),  # U+202E, right-to-left override
        ("email=grace@exam%E2%80%8Bple.com", 200, EMAIL_INVISIBLE_CHARACTER.format(code="U+200B")),
        ("email=grace@example.com%E2%81%A6", 200, EMAIL_INVISIBLE_CHARACTER.format(code="U+2066")),
        ("email=" + "g" * 100_000 + "@example.com", 200, TOO_LONG),
    ],
    ids=["nul", "invalid-utf8", "bidi-override", "zero-width-space", "bidi-isolate", "100-kB"],
)
def test_hostile_input_gets_a_form_error_and_sends_nothing(client, grace, body, status, message):
    response = ask_raw(client, body)

    assert response.status_code == status
    assert message in text(response)
    assert '<input type="email" name="email"' in text(response)
    assert mail.outbox == []
    assert requested_rows() == []
