"""The page an invitation's link opens, in process (portal/invitations.py), with Django's test
client and the email from the locmem outbox: the invited person accepts signed in, or creates an
account and is signed in; the same page for every visitor whether or not an address has an
account; malformed links answered by the page itself, never a 500.

Sending, withdrawing, roles and removals (the console's members section):
tests/portal/test_console_members.py. The services: tests/accounts/test_invitations.py; in
Chromium: tests/e2e/browser/test_invitation_page.py."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.invitations.selectors import INVITATION_UNKNOWN
from accounts.invitations.services import (
    EMAIL_MISMATCH,
    invitation_create,
)
from accounts.models import ExternalIdentity, IdentityProvider, Invitation, Membership, Role, User
from core.models import AuditAction, AuditEvent
from oauth.parameter_guard import PARAMETER_HAS_NUL
from portal.invitations import USERNAME_IS_EMAIL
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as Response

pytestmark = pytest.mark.django_db

ADA = "ada@example.com"
PASSWORD = "a-long-and-unusual-passphrase"
_LINK = re.compile(r"^https?://\S+(/accounts/invitations/[A-Za-z0-9_-]{43}/)$", re.MULTILINE)
# The invitation page's headings and buttons (templates/accounts/invitation*.html).
CANNOT_BE_USED = "This invitation cannot be used"
CREATE_ACCOUNT = "Create the account and join"


def _csrf(browser: Client, page: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', browser.get(page).content.decode())
    assert match is not None
    return match.group(1)


def _text(response: Response) -> str:
    return html.unescape(response.content.decode())


def _words(response: Response) -> str:
    """The page's words as a person reads them: no markup, one space between words."""
    return " ".join(re.sub("<[^>]+>", " ", _text(response)).split())


def _invitation_path(owner: Membership, email: str = ADA, role: str = "contributor") -> str:
    """Invite ``email``; the path of the link the email carries."""
    invitation_create(by=owner.user, tenant=owner.tenant, email=email, role=role)
    [path] = _LINK.findall(str(mail.outbox[-1].body))
    return path


def test_the_page_has_no_inline_script_or_style(owner):
    text = Client().get(_invitation_path(owner)).content.decode()

    assert " style=" not in text
    assert "<script" not in text
    assert re.search(r"<style(?! nonce=)", text) is None


# The invitation page


def test_a_person_without_an_account_creates_one_joins_and_is_signed_in(owner):
    path = _invitation_path(owner, role="contributor")
    visitor = Client(enforce_csrf_checks=True)

    shown = _words(visitor.get(path))
    assert "invited ada@example.com to Acme Test as contributor" in shown
    assert CREATE_ACCOUNT in shown
    token = _csrf(visitor, path)
    created = visitor.post(
        path, {"username": "ada", "password1": PASSWORD, "password2": PASSWORD, "csrfmiddlewaretoken": token}
    )

    assert (created.status_code, created["Location"]) == (302, reverse("home"))
    user = User.objects.get(username="ada")
    assert user.email == ADA
    assert Membership.objects.get(user=user, tenant=owner.tenant).role == Role.CONTRIBUTOR
    home = _words(visitor.get("/"))
    assert "Sign out ada" in home
    assert "Acme Test (acme-test; you are contributor)" in home
    assert AuditEvent.objects.filter(action=AuditAction.LOGIN_SUCCEEDED, user=user).exists()
    # The link again: the person who used it goes home, anyone else is refused.
    assert visitor.get(path)["Location"] == reverse("home")
    reused = Client().get(path)
    assert reused.status_code == 410
    assert "accepted already" in _text(reused)


@pytest.mark.parametrize(
    ("username", "password", "again", "message"),
    [
        ("ada", "password", "password", "This password is too common."),
        ("ada", PASSWORD, PASSWORD + "x", "The two password fields didn\u2019t match."),
        ("ada", "adaexample", "adaexample", "The password is too similar to the email address."),
        ("ada@example.com", PASSWORD, PASSWORD, USERNAME_IS_EMAIL),
        ("OWNER", PASSWORD, PASSWORD, "A user with that username already exists."),
        ("ada\u202e", PASSWORD, PASSWORD, "Enter a valid username."),
        ("a" * 151, PASSWORD, PASSWORD, "Ensure this value has at most 150 characters"),
    ],
    ids=["common", "mismatch", "similar", "email-as-username", "taken", "bidi", "overlong"],
)
def test_a_new_account_is_checked_like_any_password(owner, username, password, again, message):
    path = _invitation_path(owner)

    response = Client().post(path, {"username": username, "password1": password, "password2": again})

    assert response.status_code == 400
    assert message in _text(response)
    assert Invitation.objects.get().accepted_at is None
    assert User.objects.count() == 1


def test_a_visitor_sees_the_same_page_whether_or_not_the_address_has_an_account(owner):
    UserFactory.create(username="grace", email="grace@example.com")
    with_account = _invitation_path(owner, email="grace@example.com")
    without = _invitation_path(owner, email="heidi@example.com")

    def shown(path: str, email: str) -> str:
        text = _text(Client().get(path)).replace(path, "PATH").replace(email, "EMAIL")
        text = re.sub(r"/accounts/invitations/[^/]+/|%2Faccounts%2Finvitations%2F[^%]+%2F", "PATH", text)
        # The moment each was sent, and what differs between any two answers.
        text = re.sub(r"<time [^>]*>[^<]*</time>", "TIME", text)
        return re.sub(r'(nonce|name="csrfmiddlewaretoken" value)="[^"]*"', "", text)

    assert shown(with_account, "grace@example.com") == shown(without, "heidi@example.com")


def test_the_invited_person_signed_in_accepts_with_a_button(owner):
    path = _invitation_path(owner, role="viewer")
    ada = UserFactory.create(username="ada", email="ADA@example.com")
    visitor = Client()
    visitor.force_login(ada)

    assert "Join Acme Test</button>" in _text(visitor.get(path))
    accepted = visitor.post(path)

    assert (accepted.status_code, accepted["Location"]) == (302, reverse("home"))
    assert Membership.objects.get(user=ada, tenant=owner.tenant).role == Role.VIEWER


def test_someone_signed_in_with_another_address_is_told_to_sign_in_with_the_invited_one(owner, outsider):
    path = _invitation_path(owner)
    visitor = Client()
    visitor.force_login(outsider.user)

    shown, posted = visitor.get(path), visitor.post(path)

    assert shown.status_code == 403
    assert EMAIL_MISMATCH.format(email=ADA) in _text(shown)
    assert posted.status_code == 403
    assert Invitation.objects.get().accepted_at is None


def test_an_anonymous_visitor_is_offered_the_sign_in_page_that_comes_back(owner):
    path = _invitation_path(owner)

    page = _text(Client().get(path))

    assert f'href="{reverse("login")}?next={path.replace("/", "%2F")}"' in page


def test_where_the_provider_is_required_the_page_sends_the_visitor_through_it(owner):
    provider = IdentityProvider.objects.create(
        tenant=owner.tenant, name="Acme SSO", issuer="https://sso.acme.test", client_id="gh", required=True
    )
    path = _invitation_path(owner)

    page = _text(Client().get(path))
    refused = Client().post(path, {"username": "ada", "password1": PASSWORD, "password2": PASSWORD})

    sso = reverse("sign-in-tenant", args=[owner.tenant.slug])
    assert f'href="{sso}?next={path.replace("/", "%2F")}"' in page
    assert CREATE_ACCOUNT not in page
    assert refused.status_code == 403
    assert not User.objects.filter(username="ada").exists()

    # Back from the provider, signed in and linked: the button that accepts.
    ada = UserFactory.create(username="acme.ada", email="")
    ExternalIdentity.objects.create(provider=provider, subject="s-ada", user=ada, email=ADA)
    visitor = Client()
    visitor.force_login(ada)
    assert "Join Acme Test</button>" in _text(visitor.get(path))
    assert visitor.post(path).status_code == 302
    assert Membership.objects.filter(user=ada, tenant=owner.tenant).exists()


@pytest.mark.parametrize(
    "tail",
    ["short/", "a" * 43 + "/", "%00%00/", "%ED%A0%80/", "x" * 5000 + "/", "%E2%80%AE" + "a" * 40 + "/"],
    ids=["short", "unknown", "nul", "invalid-utf8", "huge", "bidi"],
)
def test_a_malformed_or_unknown_link_is_the_pages_own_refusal(tail):
    response = Client().get(f"/accounts/invitations/{tail}")

    assert response.status_code == 404
    assert INVITATION_UNKNOWN in _text(response)
    assert CANNOT_BE_USED in _text(response)


def test_a_nul_in_the_query_is_refused_with_its_reason(owner):
    path = _invitation_path(owner)

    response = Client().get(f"{path}?next=%00")

    assert response.status_code == 400
    assert PARAMETER_HAS_NUL.format(name="'next'") in _text(response)


@pytest.mark.parametrize("state", ["expired", "revoked"])
def test_an_expired_or_revoked_link_says_so(owner, state):
    path = _invitation_path(owner)
    past = timezone.now() - timedelta(seconds=1)
    Invitation.objects.update(**{"expires" if state == "expired" else "revoked_at": past})

    shown = Client().get(path)
    posted = Client().post(path, {"username": "ada", "password1": PASSWORD, "password2": PASSWORD})

    assert (shown.status_code, posted.status_code) == (410, 410)
    assert ("expired on" if state == "expired" else "withdrawn") in _text(shown)
    assert not User.objects.filter(username="ada").exists()


def test_a_password_sign_in_of_the_new_account_works(owner):
    path = _invitation_path(owner)
    Client().post(path, {"username": "ada", "password1": PASSWORD, "password2": PASSWORD})

    signed_in = Client().post(reverse("login"), {"username": "ada", "password": PASSWORD})
    refused = Client().post(reverse("login"), {"username": "ada", "password": DEFAULT_PASSWORD})

    assert signed_in.status_code == 302
    assert refused.status_code == 200
