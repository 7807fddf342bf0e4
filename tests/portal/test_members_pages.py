"""A tenant admin's members page and the page an invitation's link opens, in process (portal/members.py,
portal/invitations.py), with Django's test client and the email from the locmem outbox: an admin
invites, changes a role, removes a member and revokes an invitation of their own tenants only; a
viewer is refused; the invited person accepts signed in, or creates an account and is signed in;
the same page for every visitor whether or not an address has an account; hostile input, another
tenant's ids and malformed links answered by the pages themselves, never a 500.

The services: tests/accounts/test_invitations.py; in Chromium: tests/e2e/browser/test_invitation_page.py."""

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

from accounts.invitations import services
from accounts.invitations.members import LAST_ADMIN
from accounts.invitations.selectors import INVITATION_UNKNOWN, MEMBER_NOT_FOUND
from accounts.invitations.services import (
    EMAIL_INVISIBLE,
    EMAIL_MISMATCH,
    EMAIL_TOO_LONG,
    ROLE_UNKNOWN,
    TENANT_NOT_YOURS,
    invitation_create,
)
from accounts.models import ExternalIdentity, IdentityProvider, Invitation, Membership, Role, User
from core.models import AuditAction, AuditEvent
from oauth.parameter_guard import PARAMETER_HAS_NUL, PARAMETER_NOT_UTF8
from portal.invitations import USERNAME_IS_EMAIL
from portal.members import ADMINS_ONLY, INVITATION_SENT
from tests.support.factories import DEFAULT_PASSWORD, MembershipFactory, UserFactory

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as Response

pytestmark = pytest.mark.django_db

PAGE = reverse("accounts:members")
INVITE = reverse("accounts:member-invite")
REVOKE = reverse("accounts:invitation-revoke")
ROLE = reverse("accounts:member-role")
REMOVE = reverse("accounts:member-remove")
ADA = "ada@example.com"
PASSWORD = "a-long-and-unusual-passphrase"
_LINK = re.compile(r"^https?://\S+(/accounts/invitations/[A-Za-z0-9_-]{43}/)$", re.MULTILINE)
# The invitation page's headings and buttons (templates/accounts/invitation*.html).
CANNOT_BE_USED = "This invitation cannot be used"
CREATE_ACCOUNT = "Create the account and join"


@pytest.fixture
def browser(owner) -> Client:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner.user)
    return browser


def _csrf(browser: Client, page: str = PAGE) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', browser.get(page).content.decode())
    assert match is not None
    return match.group(1)


def _post(browser: Client, url: str, data: dict[str, str]) -> Response:
    return browser.post(url, {**data, "csrfmiddlewaretoken": _csrf(browser)})


def _post_raw(browser: Client, url: str, body: str) -> Response:
    """A form body exactly as given: percent-escapes a browser would never send included."""
    token = _csrf(browser)
    return browser.post(
        url, f"{body}&csrfmiddlewaretoken={token}", content_type="application/x-www-form-urlencoded"
    )


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


# The members page


def test_the_page_lists_the_people_and_open_invitations_of_my_admin_tenants_only(
    browser, owner, member, outsider
):
    _invitation_path(owner, email="grace@example.com")
    _invitation_path(outsider, email="eve@example.com")

    page = _text(browser.get(PAGE))

    assert "member@example.com" in page
    assert "grace@example.com" in page
    assert outsider.user.username not in page
    assert "eve@example.com" not in page
    assert f'<option value="{outsider.tenant.slug}"' not in page
    assert f'<a href="{PAGE}" aria-current="page">Members</a>' in page


def test_an_admin_invites_someone_and_the_email_carries_the_link(browser, owner):
    response = _post(
        browser, INVITE, {"tenant": owner.tenant.slug, "email": "Ada@Example.com", "role": "viewer"}
    )

    assert (response.status_code, response["Location"]) == (302, PAGE)
    [message] = mail.outbox
    assert message.to == [ADA]
    assert _LINK.search(str(message.body)) is not None
    assert INVITATION_SENT.format(email=ADA, days=7, plural="s") in _text(browser.get(PAGE))
    assert Invitation.objects.get().role == Role.VIEWER


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("email=ada%00@example.com&role=viewer", 400, PARAMETER_HAS_NUL.format(name="'email'")),
        ("email=ada%ED%A0%80@example.com&role=viewer", 400, PARAMETER_NOT_UTF8.format(name="'email'")),
        ("email=ada@exa%E2%80%AEmple.com&role=viewer", 422, EMAIL_INVISIBLE.format(code="U+202E")),
        ("email=ada%E2%80%8B@example.com&role=viewer", 422, EMAIL_INVISIBLE.format(code="U+200B")),
        ("email=" + "a" * 5000 + "@example.com&role=viewer", 422, EMAIL_TOO_LONG),
        ("email=ada@example.com&role=owner", 422, ROLE_UNKNOWN),
        ("email=ada@example.com&role=admin%00", 400, PARAMETER_HAS_NUL.format(name="'role'")),
        ("email=%3Cscript%3Ealert(1)%3C/script%3E&role=viewer", 422, "Enter the email address to invite"),
    ],
    ids=["nul", "invalid-utf8", "bidi", "zero-width", "huge", "role", "role-nul", "markup"],
)
def test_hostile_input_is_the_page_with_its_reason(browser, owner, body, status, message):
    response = _post_raw(browser, INVITE, f"tenant={owner.tenant.slug}&{body}")

    assert response.status_code == status
    page = response.content.decode()
    assert message in html.unescape(page)
    assert "<script>" not in page
    assert not Invitation.objects.exists()
    assert mail.outbox == []


def test_an_admin_past_the_hours_limit_is_told_when_to_try_again(browser, owner, monkeypatch):
    monkeypatch.setattr(services, "SENT_PER_HOUR_MAX", 1)
    _invitation_path(owner, email="grace@example.com")

    response = _post(browser, INVITE, {"tenant": owner.tenant.slug, "email": ADA, "role": "viewer"})

    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 3600
    assert "1 invitations per hour per admin" in _text(response)
    assert f'value="{ADA}"' in response.content.decode()
    assert not Invitation.objects.filter(email=ADA).exists()


def test_inviting_into_another_tenant_is_not_found(browser, outsider):
    response = _post(browser, INVITE, {"tenant": outsider.tenant.slug, "email": ADA, "role": "admin"})

    assert response.status_code == 404
    assert TENANT_NOT_YOURS in response.content.decode()
    assert not Invitation.objects.exists()


def test_an_admin_changes_a_role_and_removes_a_member(browser, owner, member):
    changed = _post(browser, ROLE, {"member": str(member.pk), "role": "contributor"})
    assert (changed.status_code, changed["Location"]) == (302, PAGE)
    assert Membership.objects.get(pk=member.pk).role == Role.CONTRIBUTOR

    removed = _post(browser, REMOVE, {"member": str(member.pk)})
    assert (removed.status_code, removed["Location"]) == (302, PAGE)
    assert not Membership.objects.filter(pk=member.pk).exists()
    assert "member was removed from Acme Test." in _text(browser.get(PAGE))


def test_the_last_admin_is_told_why_they_cannot_step_down(browser, owner):
    response = _post(browser, ROLE, {"member": str(owner.pk), "role": "viewer"})

    assert response.status_code == 403
    assert LAST_ADMIN.format(username="owner", tenant="Acme Test") in _text(response)
    assert Membership.objects.get(pk=owner.pk).role == Role.ADMIN


def test_an_admin_who_steps_down_goes_home(browser, owner, member):
    Membership.objects.filter(pk=member.pk).update(role=Role.ADMIN)

    response = _post(browser, ROLE, {"member": str(owner.pk), "role": "viewer"})

    assert (response.status_code, response["Location"]) == (302, reverse("home"))


@pytest.mark.parametrize("url", [ROLE, REMOVE])
def test_another_tenants_member_is_not_found(browser, outsider, url):
    response = _post(browser, url, {"member": str(outsider.pk), "role": "viewer"})

    assert response.status_code == 404
    assert MEMBER_NOT_FOUND in response.content.decode()
    assert Membership.objects.get(pk=outsider.pk).role == Role.ADMIN


@pytest.mark.parametrize("member_id", ["", "abc", "9" * 40, "-1", "1e3"])
def test_a_member_id_that_is_no_id_is_not_found(browser, member_id):
    assert _post(browser, REMOVE, {"member": member_id}).status_code == 404


def test_a_role_that_is_no_role_is_the_page_with_its_reason(browser, owner, member):
    response = _post_raw(browser, ROLE, f"member={member.pk}&role=viewer%E2%80%8B")

    assert response.status_code == 422
    assert ROLE_UNKNOWN in _text(response)


def test_an_admin_revokes_an_invitation_of_their_tenant_only(browser, owner, outsider):
    _invitation_path(owner)
    _invitation_path(outsider, email="eve@example.com")
    mine = Invitation.objects.get(email=ADA)
    theirs = Invitation.objects.get(email="eve@example.com")

    assert _post(browser, REVOKE, {"invitation": str(theirs.pk)}).status_code == 404
    revoked = _post(browser, REVOKE, {"invitation": str(mine.pk)})

    assert revoked.status_code == 302
    assert Invitation.objects.get(pk=mine.pk).revoked_at is not None
    assert Invitation.objects.get(pk=theirs.pk).revoked_at is None
    assert AuditEvent.objects.filter(action=AuditAction.INVITATION_REVOKED, user=owner.user).count() == 1


def test_a_viewer_is_refused_every_form(owner, member):
    viewer = Client()
    viewer.force_login(member.user)
    _invitation_path(owner)

    answers = [
        viewer.get(PAGE),
        viewer.post(INVITE, {"tenant": member.tenant.slug, "email": ADA, "role": "admin"}),
        viewer.post(ROLE, {"member": str(member.pk), "role": "admin"}),
        viewer.post(REMOVE, {"member": str(owner.pk)}),
        viewer.post(REVOKE, {"invitation": str(Invitation.objects.get().pk)}),
    ]

    assert [answer.status_code for answer in answers] == [403] * 5
    assert ADMINS_ONLY in answers[0].content.decode()
    assert Membership.objects.get(pk=member.pk).role == Role.VIEWER
    assert Invitation.objects.get().revoked_at is None


def test_an_admin_elsewhere_is_not_found_in_a_tenant_where_they_are_a_viewer(owner, outsider):
    MembershipFactory.create(user=outsider.user, tenant=owner.tenant, role=Role.VIEWER)
    other = Client()
    other.force_login(outsider.user)

    assert other.post(INVITE, {"tenant": owner.tenant.slug, "email": ADA, "role": "admin"}).status_code == 404
    assert other.post(REMOVE, {"member": str(owner.pk)}).status_code == 404
    assert Membership.objects.filter(pk=owner.pk).exists()


def test_signed_out_visitors_are_sent_to_sign_in_and_forms_need_the_csrf_token(browser, owner):
    assert "/accounts/login/" in Client().get(PAGE)["Location"]
    assert (
        browser.post(INVITE, {"tenant": owner.tenant.slug, "email": ADA, "role": "viewer"}).status_code == 403
    )
    assert not Invitation.objects.exists()


def test_the_navigation_offers_members_to_admins_only(owner, member):
    admin, viewer = Client(), Client()
    admin.force_login(owner.user)
    viewer.force_login(member.user)

    assert f'<a href="{PAGE}">Members</a>' in admin.get("/").content.decode()
    assert f'href="{PAGE}"' not in viewer.get("/").content.decode()


def test_the_pages_have_no_inline_script_or_style(browser, owner):
    path = _invitation_path(owner)

    for page in (browser.get(PAGE), Client().get(path)):
        text = page.content.decode()
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
