"""Password reset, in process (portal/password_reset.py): the email from the locmem backend, its
link followed to a new password; the same answer whether or not an address has an account; limits
per client address and per email address; audit rows; hostile input answered with a form error or
the invalid-link page, never a 500; expired and used links refused.

In Chromium against Daphne, with the email read from the server's mail files:
tests/e2e/browser/test_password_reset_page.py."""

from __future__ import annotations

import html
import logging
import re
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils.http import urlsafe_base64_encode

from accounts.models import User
from core import request_context as request_context_module
from core.models import AuditAction, AuditEvent, AuditOutcome, RateLimitRule, RateLimitScope
from core.request_context import RequestContext
from oauth.models import AccessToken
from oauth.parameter_guard import PARAMETER_HAS_NUL, PARAMETER_NOT_UTF8
from portal.password_reset import EMAIL_INVISIBLE_CHARACTER, PASSWORD_RESET_THROTTLED, duration_words
from tests.support.factories import (
    DEFAULT_PASSWORD,
    AccessTokenFactory,
    McpSessionFactory,
    MembershipFactory,
    RefreshTokenFactory,
    UserFactory,
)

if TYPE_CHECKING:
    # What the test client answers, in django-stubs' words.
    from django.test.client import _MonkeyPatchedWSGIResponse as Response

pytestmark = pytest.mark.django_db

RESET = reverse("accounts:password-reset")
SENT = reverse("accounts:password-reset-done")
COMPLETE = reverse("accounts:password-reset-complete")
NEW_PASSWORD = "a-new-and-longer-passphrase-42"
# The confirm page's headings (templates/registration/password_reset_confirm.html).
INVALID_LINK = "This link cannot be used"
CHOOSE = "Choose a new password"
# Django's own form errors.
NOT_AN_EMAIL = "Enter a valid email address."
TOO_LONG = "Ensure this value has at most 254 characters"
LIMIT = 2
_LINK = re.compile(r"^(https?://\S+/accounts/password-reset/[^/\s]+/[^/\s]+/)$", re.MULTILINE)


@pytest.fixture
def grace() -> User:
    return UserFactory.create(username="grace", email="grace@example.com")


@pytest.fixture
def limit_rule(settings) -> RateLimitRule:
    """An operator's rule: LIMIT requests an hour (the default is 5), so a test reaches it quickly.
    Every refusal is its own audit row: counted ones would be written when the process exits, to
    the database of no test."""
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_REFUSAL_WINDOW_SECONDS": 0}
    return RateLimitRule.objects.create(scope=RateLimitScope.PASSWORD_RESET, limit=LIMIT, period_seconds=3600)


@contextmanager
def requests_from(address: str) -> Iterator[None]:
    """Requests made inside come from ``address``, as core.request_context's middleware would say.
    That middleware wraps the ASGI application, outside Django, so the test client never runs it:
    this sets what it sets, reaching into the module's context variable on purpose."""
    token = request_context_module._current.set(
        RequestContext(request_id=f"test-{secrets.token_hex(6)}", ip=address)
    )
    try:
        yield
    finally:
        request_context_module._current.reset(token)


def _address() -> str:
    # 198.18.0.0/15 is for benchmarks, never a real client.
    return f"198.18.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"


def _ask(client: Client, email: str, *, host: str | None = None) -> Response:
    return client.post(RESET, {"email": email}, headers={"Host": host} if host else None)


def _ask_raw(client: Client, body: str) -> Response:
    """A form body exactly as given: percent-escapes a browser would never send included."""
    return client.post(RESET, data=body, content_type="application/x-www-form-urlencoded")


def _link(message: mail.EmailMessage) -> str:
    [link] = _LINK.findall(str(message.body))
    return link


def _form_path(client: Client, link: str) -> str:
    """Open a reset link as a browser does: the address of the new password's form it leads to."""
    return client.get(urlsplit(link).path)["Location"]


def _set_password(client: Client, form_path: str, password: str = NEW_PASSWORD) -> Response:
    return client.post(form_path, {"new_password1": password, "new_password2": password})


def _text(response: Response) -> str:
    """The page as a person reads its text: entities (``&#x27;``) unescaped."""
    return html.unescape(response.content.decode())


def _page(response: Response) -> str:
    """The page without what differs between any two answers: the CSP nonce and the CSRF token."""
    text = response.content.decode()
    text = re.sub(r'nonce="[^"]*"', 'nonce=""', text)
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', 'name="csrfmiddlewaretoken"', text)


def _requested_rows() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AuditAction.PASSWORD_RESET_REQUESTED).order_by("id"))


class _GeneratorAt(PasswordResetTokenGenerator):
    """Django's token generator with its clock at ``moment``: a link made then. Django's own tests
    set the clock the same way (its ``_now`` hook)."""

    def __init__(self, moment: datetime) -> None:
        super().__init__()
        self.moment = moment

    def _now(self) -> datetime:
        return self.moment


def _confirm_path(user: User, token: str) -> str:
    uidb64 = urlsafe_base64_encode(str(user.pk).encode())
    return reverse("accounts:password-reset-confirm", kwargs={"uidb64": uidb64, "token": token})


def _link_made_ago(user: User, seconds: int) -> str:
    # Django's generator reads the same naive local clock (PasswordResetTokenGenerator._now).
    return _confirm_path(user, _GeneratorAt(datetime.now() - timedelta(seconds=seconds)).make_token(user))


# --- the whole flow ---------------------------------------------------------------------------------


def test_the_email_names_the_site_and_its_link_sets_a_new_password_that_signs_in(client, grace):
    asked = _ask(client, "grace@example.com")
    assert (asked.status_code, asked["Location"]) == (302, SENT)

    [message] = mail.outbox
    assert message.to == ["grace@example.com"]
    assert message.subject == f"Reset your Gatehouse password ({urlsplit(settings.PUBLIC_URL).netloc})"
    assert f'the Gatehouse account "grace" at {settings.PUBLIC_URL}.' in message.body
    assert "The link works once and expires in 1 hour." in message.body
    link = _link(message)
    assert link.startswith(f"{settings.PUBLIC_URL}/accounts/password-reset/")

    # Django moves the token into the session and off the address bar (no Referer carries it).
    opened = client.get(urlsplit(link).path)
    assert opened.status_code == 302
    form_path = opened["Location"]
    assert form_path.endswith("/set-password/")
    assert CHOOSE in _text(client.get(form_path))

    done = _set_password(client, form_path)
    assert (done.status_code, done["Location"]) == (302, COMPLETE)
    assert "Your password is changed" in _text(client.get(COMPLETE))

    signed_in = Client().post(reverse("login"), {"username": "grace", "password": NEW_PASSWORD})
    assert signed_in.status_code == 302
    refused = Client().post(reverse("login"), {"username": "grace", "password": DEFAULT_PASSWORD})
    assert refused.status_code == 200


def test_the_link_comes_from_public_url_whatever_host_the_request_named(client, grace):
    # localhost is an allowed host, so Django serves the request; the link still names PUBLIC_URL.
    _ask(client, grace.email, host="localhost")

    [message] = mail.outbox
    assert _link(message).startswith(f"{settings.PUBLIC_URL}/")
    assert "localhost" not in f"{message.subject}\n{message.body}"


def test_the_sign_in_page_links_to_the_reset_page(client):
    page = _text(client.get(reverse("login")))

    assert f'<a href="{RESET}">Forgot your password?</a>' in page


def test_the_pages_say_how_long_a_link_lasts(client, settings):
    settings.PASSWORD_RESET_TIMEOUT = 30 * 60

    assert "for 30 minutes" in _text(client.get(SENT))


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(3600, "1 hour"), (7200, "2 hours"), (5400, "90 minutes"), (86400, "1 day"), (90, "90 seconds")],
)
def test_a_link_s_life_reads_as_words(seconds, words):
    assert duration_words(seconds) == words


# --- no account enumeration ----------------------------------------------------------------------------


def test_an_address_without_an_account_gets_the_same_answer_and_no_email(client, grace):
    known = _ask(client, grace.email)
    unknown = _ask(client, "nobody@example.com")

    assert (unknown.status_code, unknown["Location"]) == (known.status_code, known["Location"])
    assert _page(client.get(unknown["Location"])) == _page(client.get(known["Location"]))
    assert [message.to for message in mail.outbox] == [[grace.email]]


@pytest.mark.parametrize(
    "account", [{"is_active": False}, {"password": None}], ids=["inactive", "no-usable-password"]
)
def test_an_account_that_cannot_reset_gets_the_same_answer_and_no_email(client, account):
    UserFactory.create(username="henry", email="henry@example.com", **account)

    asked = _ask(client, "henry@example.com")

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
        asked = _ask(client, grace.email)

    assert (asked.status_code, asked["Location"]) == (302, SENT)
    assert "Failed to send password reset email" in caplog.text


# --- limits ------------------------------------------------------------------------------------------


def test_one_address_asking_for_many_accounts_is_refused_with_a_retry_time(client, grace, limit_rule):
    address = _address()
    with requests_from(address):
        for number in range(LIMIT):
            assert _ask(client, f"person-{number}@example.com").status_code == 302
        refused = _ask(client, grace.email)

    assert refused.status_code == 429
    seconds = int(refused["Retry-After"])
    assert 1 <= seconds <= 3600
    assert PASSWORD_RESET_THROTTLED.format(seconds=seconds) in _text(refused)
    assert mail.outbox == []


def test_many_addresses_asking_for_one_account_are_refused(client, grace, limit_rule):
    for _ in range(LIMIT):
        with requests_from(_address()):
            assert _ask(client, grace.email).status_code == 302
    with requests_from(_address()):
        # The same address in other letter case and with spaces around is the same address.
        refused = _ask(client, f"  {grace.email.upper()} ")

    assert refused.status_code == 429
    assert len(mail.outbox) == LIMIT


def test_an_address_refused_leaves_other_addresses_their_budget(client, grace, limit_rule):
    with requests_from(_address()):
        for number in range(LIMIT):
            _ask(client, f"person-{number}@example.com")
        assert _ask(client, grace.email).status_code == 429

    with requests_from(_address()):
        assert _ask(client, grace.email).status_code == 302


def test_a_refusal_reads_the_same_for_an_address_with_and_without_an_account(client, grace, limit_rule):
    with requests_from(_address()):
        for number in range(LIMIT):
            _ask(client, f"person-{number}@example.com")
        known = _ask(client, grace.email)
        unknown = _ask(client, "nobody@example.com")

    assert (unknown.status_code, unknown["Retry-After"]) == (known.status_code, known["Retry-After"])
    assert _page(unknown).replace("nobody@example.com", "ADDRESS") == _page(known).replace(
        grace.email, "ADDRESS"
    )


def test_a_refusal_is_audited_as_rate_limited_and_sends_nothing(client, grace, limit_rule):
    address = _address()
    with requests_from(address):
        for number in range(LIMIT):
            _ask(client, f"person-{number}@example.com")
        _ask(client, grace.email)

    [refusal] = AuditEvent.objects.filter(action=AuditAction.RATE_LIMITED)
    assert (refusal.outcome, refusal.ip, refusal.target) == (AuditOutcome.DENIED, address, RESET)
    assert refusal.detail["scope"] == "password_reset"
    # The refused request asked for nothing: only those let in are password.reset_requested rows.
    assert [row.detail["email"] for row in _requested_rows()] == [
        f"person-{n}@example.com" for n in range(LIMIT)
    ]


# --- audit ---------------------------------------------------------------------------------------------


def test_each_request_is_audited_with_what_it_found_in_its_detail_only(client, grace):
    address = _address()
    with requests_from(address):
        _ask(client, grace.email)
        _ask(client, "nobody@example.com")

    known, unknown = _requested_rows()
    # Nothing but the detail tells them apart: no user, username or tenant to find a row by.
    for row in (known, unknown):
        assert (row.user_id, row.username, row.tenant_id, row.outcome, row.ip) == (
            None, "", None, AuditOutcome.OK, address,
        )  # fmt: skip
    assert known.detail == {"email": grace.email, "accountsFound": 1}
    assert unknown.detail == {"email": "nobody@example.com", "accountsFound": 0}


def test_a_password_set_through_a_link_is_audited_for_its_person(client, grace):
    _ask(client, grace.email)
    form_path = _form_path(client, _link(mail.outbox[0]))

    _set_password(client, form_path)

    [row] = AuditEvent.objects.filter(action=AuditAction.PASSWORD_RESET)
    assert (row.user_id, row.username, row.outcome) == (grace.pk, "grace", AuditOutcome.OK)


def test_a_reset_disconnects_the_persons_clients_and_no_one_elses(client, grace):
    mine = MembershipFactory.create(user=grace)
    refresh = RefreshTokenFactory.create(access_token=AccessTokenFactory.create(membership=mine))
    session = McpSessionFactory.create(membership=mine)
    someone_elses = AccessTokenFactory.create()
    _ask(client, grace.email)

    _set_password(client, _form_path(client, _link(mail.outbox[0])))

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
    _ask(client, grace.email)

    _set_password(client, _form_path(client, _link(mail.outbox[0])))

    assert elsewhere.get("/accounts/sessions/")["Location"].startswith("/accounts/login/")


# --- expired and used links ------------------------------------------------------------------------------


def test_a_link_older_than_its_life_is_refused(client, grace):
    page = client.get(_link_made_ago(grace, settings.PASSWORD_RESET_TIMEOUT + 60))

    assert page.status_code == 200
    assert INVALID_LINK in _text(page)
    assert "a link works for 1 hour" in _text(page)


def test_a_link_within_its_life_still_opens_the_form(client, grace):
    # The guard of the test above: the same link, made a little later, works.
    opened = client.get(_link_made_ago(grace, settings.PASSWORD_RESET_TIMEOUT - 60))

    assert opened.status_code == 302
    assert CHOOSE in _text(client.get(opened["Location"]))


def test_a_used_link_is_refused(client, grace):
    _ask(client, grace.email)
    link = _link(mail.outbox[0])
    _set_password(client, _form_path(client, link))

    again = Client().get(urlsplit(link).path)

    assert again.status_code == 200
    assert INVALID_LINK in _text(again)


def test_an_older_link_is_refused_once_another_has_set_the_password(client, grace):
    _ask(client, grace.email)
    _ask(client, grace.email)
    first, second = (_link(message) for message in mail.outbox)
    _set_password(client, _form_path(client, second))

    assert INVALID_LINK in _text(Client().get(urlsplit(first).path))


def test_the_form_of_a_used_link_is_refused_on_a_second_post(client, grace):
    _ask(client, grace.email)
    form_path = _form_path(client, _link(mail.outbox[0]))
    _set_password(client, form_path)

    again = _set_password(client, form_path, "yet-another-passphrase-7")

    assert INVALID_LINK in _text(again)
    grace.refresh_from_db()
    assert grace.check_password(NEW_PASSWORD)


# --- hostile input --------------------------------------------------------------------------------------


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
    response = _ask_raw(client, body)

    assert response.status_code == status
    assert message in _text(response)
    assert '<input type="email" name="email"' in _text(response)
    assert mail.outbox == []
    assert _requested_rows() == []


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
    assert INVALID_LINK in _text(page)


def test_a_nul_in_the_new_password_is_a_form_error(client, grace):
    _ask(client, grace.email)
    form_path = _form_path(client, _link(mail.outbox[0]))

    response = client.post(
        form_path,
        data="new_password1=a%00b&new_password2=a%00b",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 400
    assert PARAMETER_HAS_NUL.format(name="'new_password1'") in _text(response)
    assert CHOOSE in _text(response)
    grace.refresh_from_db()
    assert grace.check_password(DEFAULT_PASSWORD)
