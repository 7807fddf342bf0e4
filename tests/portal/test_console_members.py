"""The console's members section (portal/console/members.py): a tenant's admin changes a member's
role, removes a member after confirming, invites someone and withdraws an invitation, each through
the accounts services and audited; the last admin cannot step down or be removed; a viewer sees
the lists without forms and cannot post; another tenant's ids are not found; hostile input is the
page's own message. The old /accounts/members/ addresses send people here.

The services: tests/accounts/test_invitations.py; the invitation link's page:
tests/portal/test_members_pages.py; in Chromium: tests/e2e/browser/test_console_members_page.py."""

from __future__ import annotations

import html
import re

import pytest
from django.core import mail
from django.test import Client

from accounts.invitations import services
from accounts.invitations.members import LAST_ADMIN
from accounts.invitations.selectors import INVITATION_NOT_FOUND, MEMBER_NOT_FOUND
from accounts.invitations.services import EMAIL_INVISIBLE, EMAIL_TOO_LONG, ROLE_UNKNOWN, invitation_create
from accounts.models import Invitation, Membership, Role
from core.models import AuditAction, AuditEvent
from oauth.parameter_guard import PARAMETER_HAS_NUL, PARAMETER_NOT_UTF8
from portal.console.members import INVITATION_SENT, MEMBER_REMOVED, ROLE_CHANGED
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

FORM = "application/x-www-form-urlencoded"


def _url(tenant, action=""):
    return f"/console/{tenant.slug}/members/{action}"


def _text(response) -> str:
    return html.unescape(response.content.decode())


@pytest.fixture
def grace(tenant):
    return MembershipFactory.create(
        user=UserFactory.create(username="grace"), tenant=tenant, role=Role.VIEWER
    )


@pytest.fixture
def elsewhere():
    """An admin of another tenant, with a member and an open invitation there."""
    other = TenantFactory.create(slug="other-tenant", name="Other")
    admin = MembershipFactory.create(user=UserFactory.create(username="olga"), tenant=other, role=Role.ADMIN)
    MembershipFactory.create(user=UserFactory.create(username="oscar"), tenant=other, role=Role.VIEWER)
    invitation_create(by=admin.user, tenant=other, email="eve@example.com", role="viewer")
    return admin


# The page


def test_the_page_lists_the_tenants_people_and_open_invitations_only(client, tenant, ada, grace, elsewhere):
    invitation_create(by=ada, tenant=tenant, email="heidi@example.com", role="contributor")

    page = _text(client.get(_url(tenant)))

    assert "grace@example.com" in page
    assert "heidi@example.com" in page
    assert "oscar" not in page
    assert "eve@example.com" not in page
    assert f'id="role-{grace.pk}"' in page


def test_a_viewer_sees_the_lists_without_forms(client, tenant, owner, vic):
    invitation_create(by=owner.user, tenant=tenant, email="heidi@example.com", role="viewer")

    page = _text(client.get(_url(tenant)))

    assert "owner@example.com" in page
    assert "heidi@example.com" in page
    assert '<form method="post"' not in page.split('aria-label="Console sections"')[1]
    assert "Only the tenant's admins change this" in page


# Roles


def test_an_admin_changes_a_members_role_and_it_is_audited(client, tenant, ada, grace):
    response = client.post(
        _url(tenant, "role/"), {"member": str(grace.pk), "role": "contributor"}, follow=True
    )

    assert Membership.objects.get(pk=grace.pk).role == Role.CONTRIBUTOR
    assert ROLE_CHANGED.format(username="grace", role="contributor", tenant=tenant.name) in _text(response)
    event = AuditEvent.objects.get(action=AuditAction.MEMBER_ROLE_CHANGED)
    assert (event.user, event.tenant, event.detail["from"], event.detail["to"]) == (
        ada,
        tenant,
        "viewer",
        "contributor",
    )


def test_the_last_admin_is_told_why_they_cannot_step_down(client, tenant, ada):
    mine = Membership.objects.get(user=ada, tenant=tenant)

    response = client.post(_url(tenant, "role/"), {"member": str(mine.pk), "role": "viewer"})

    assert response.status_code == 403
    assert LAST_ADMIN.format(username="ada", tenant=tenant.name) in _text(response)
    assert 'role="alert"' in response.content.decode()
    assert Membership.objects.get(pk=mine.pk).role == Role.ADMIN


def test_an_admin_who_steps_down_sees_the_page_without_forms(client, tenant, ada, owner):
    mine = Membership.objects.get(user=ada, tenant=tenant)

    response = client.post(_url(tenant, "role/"), {"member": str(mine.pk), "role": "viewer"}, follow=True)

    assert response.redirect_chain == [(_url(tenant), 302)]
    assert "Only the tenant's admins change this; your role here is viewer." in _text(response)


@pytest.mark.parametrize("role", ["owner", "viewer\u200b", "ADMIN", ""])
def test_a_role_that_is_no_role_is_the_page_with_its_reason(client, tenant, ada, grace, role):
    response = client.post(_url(tenant, "role/"), {"member": str(grace.pk), "role": role})

    assert response.status_code == 422
    assert ROLE_UNKNOWN in _text(response)
    assert Membership.objects.get(pk=grace.pk).role == Role.VIEWER


# Removal


def test_removal_asks_to_confirm_first(client, tenant, ada, grace):
    page = _text(client.get(_url(tenant) + f"?remove={grace.pk}"))

    assert "Remove <bdi>grace</bdi> from Acme Test?" in page
    assert f'<input type="hidden" name="member" value="{grace.pk}">' in page
    assert Membership.objects.filter(pk=grace.pk).exists()


def test_an_admin_removes_a_member_and_it_is_audited(client, tenant, ada, grace):
    response = client.post(_url(tenant, "remove/"), {"member": str(grace.pk)}, follow=True)

    assert not Membership.objects.filter(pk=grace.pk).exists()
    assert MEMBER_REMOVED.format(username="grace", tenant=tenant.name) in _text(response)
    event = AuditEvent.objects.get(action=AuditAction.MEMBER_REMOVED)
    assert (event.user, event.target, event.detail["role"]) == (ada, "grace", "viewer")


def test_the_last_admin_cannot_be_removed(client, tenant, ada):
    mine = Membership.objects.get(user=ada, tenant=tenant)

    response = client.post(_url(tenant, "remove/"), {"member": str(mine.pk)})

    assert response.status_code == 403
    assert LAST_ADMIN.format(username="ada", tenant=tenant.name) in _text(response)
    assert Membership.objects.filter(pk=mine.pk).exists()


def test_an_admin_who_removes_themselves_leaves_the_tenants_console(client, tenant, ada, owner):
    mine = Membership.objects.get(user=ada, tenant=tenant)

    response = client.post(_url(tenant, "remove/"), {"member": str(mine.pk)})

    assert (response.status_code, response["Location"]) == (302, "/console/")
    assert not Membership.objects.filter(pk=mine.pk).exists()


# Invitations


def test_an_admin_invites_someone_and_the_email_carries_the_link(client, tenant, ada):
    response = client.post(
        _url(tenant, "invite/"), {"email": "Heidi@Example.com", "role": "contributor"}, follow=True
    )

    [message] = mail.outbox
    assert message.to == ["heidi@example.com"]
    assert "/accounts/invitations/" in str(message.body)
    assert INVITATION_SENT.format(email="heidi@example.com", days=7, plural="s") in _text(response)
    invitation = Invitation.objects.get()
    assert (invitation.tenant, invitation.role) == (tenant, Role.CONTRIBUTOR)
    assert AuditEvent.objects.get(action=AuditAction.INVITATION_SENT).user == ada


def test_an_admin_withdraws_an_invitation_and_it_is_audited(client, tenant, ada):
    invitation, _ = invitation_create(by=ada, tenant=tenant, email="heidi@example.com", role="viewer")

    response = client.post(_url(tenant, "invitations/cancel/"), {"invitation": str(invitation.pk)})

    assert response.status_code == 302
    assert Invitation.objects.get(pk=invitation.pk).revoked_at is not None
    assert AuditEvent.objects.get(action=AuditAction.INVITATION_REVOKED).user == ada


def test_inviting_a_member_again_is_the_forms_own_message(client, tenant, ada, grace):
    response = client.post(_url(tenant, "invite/"), {"email": "grace@example.com", "role": "viewer"})

    assert response.status_code == 422
    assert "grace@example.com is already a member of Acme Test." in _text(response)
    assert 'value="grace@example.com"' in response.content.decode()


def test_an_admin_past_the_hours_limit_is_told_when_to_try_again(client, tenant, ada, monkeypatch):
    monkeypatch.setattr(services, "SENT_PER_HOUR_MAX", 1)
    invitation_create(by=ada, tenant=tenant, email="heidi@example.com", role="viewer")

    response = client.post(_url(tenant, "invite/"), {"email": "ivan@example.com", "role": "viewer"})

    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= 3600
    assert not Invitation.objects.filter(email="ivan@example.com").exists()


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("email=heidi%00@example.com&role=viewer", 400, PARAMETER_HAS_NUL.format(name="'email'")),
        ("email=heidi%ED%A0%80@example.com&role=viewer", 400, PARAMETER_NOT_UTF8.format(name="'email'")),
        ("email=heidi@exa%E2%80%AEmple.com&role=viewer", 422, EMAIL_INVISIBLE.format(code="U+202E")),
        ("email=heidi%E2%80%8B@example.com&role=viewer", 422, EMAIL_INVISIBLE.format(code="U+200B")),
        ("email=" + "a" * 100_000 + "@example.com&role=viewer", 422, EMAIL_TOO_LONG),
        ("email=heidi@example.com&role=owner", 422, ROLE_UNKNOWN),
        ("email=%3Cscript%3Ealert(1)%3C/script%3E&role=viewer", 422, "Enter the email address to invite"),
    ],
    ids=["nul", "invalid-utf8", "bidi", "zero-width", "huge", "role", "markup"],
)
def test_hostile_invitation_input_is_the_page_with_its_reason(client, tenant, ada, body, status, message):
    response = client.post(_url(tenant, "invite/"), body, content_type=FORM)

    assert response.status_code == status
    assert message in _text(response)
    assert "<script>" not in response.content.decode()
    assert not Invitation.objects.exists()
    assert mail.outbox == []


@pytest.mark.parametrize("action", ["role/", "remove/", "invitations/cancel/"])
def test_a_nul_or_invalid_utf8_in_any_form_is_refused_with_the_reason(client, tenant, ada, grace, action):
    body = f"member={grace.pk}%00&invitation=%FF&role=%ED%A0%80"

    response = client.post(_url(tenant, action), body, content_type=FORM)

    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()
    assert Membership.objects.get(pk=grace.pk).role == Role.VIEWER


# Other tenants, viewers, signed-out visitors


@pytest.mark.parametrize("action", ["role/", "remove/"])
def test_another_tenants_member_is_not_found(client, tenant, ada, elsewhere, action):
    theirs = Membership.objects.get(user__username="oscar")

    response = client.post(_url(tenant, action), {"member": str(theirs.pk), "role": "admin"})

    assert response.status_code == 404
    assert MEMBER_NOT_FOUND in _text(response)
    assert Membership.objects.get(pk=theirs.pk).role == Role.VIEWER


def test_another_tenants_member_is_not_found_even_by_their_admin_in_this_console(
    client, tenant, ada, elsewhere
):
    # An admin of both tenants still cannot reach the other tenant's member through this one.
    MembershipFactory.create(user=ada, tenant=elsewhere.tenant, role=Role.ADMIN)
    theirs = Membership.objects.get(user__username="oscar")

    removed = client.post(_url(tenant, "remove/"), {"member": str(theirs.pk)})
    confirm = client.get(_url(tenant) + f"?remove={theirs.pk}")

    assert (removed.status_code, confirm.status_code) == (404, 404)
    assert Membership.objects.filter(pk=theirs.pk).exists()


def test_another_tenants_invitation_is_not_found(client, tenant, ada, elsewhere):
    MembershipFactory.create(user=ada, tenant=elsewhere.tenant, role=Role.ADMIN)
    theirs = Invitation.objects.get(email="eve@example.com")

    response = client.post(_url(tenant, "invitations/cancel/"), {"invitation": str(theirs.pk)})

    assert response.status_code == 404
    assert INVITATION_NOT_FOUND in _text(response)
    assert Invitation.objects.get(pk=theirs.pk).revoked_at is None


@pytest.mark.parametrize("member_id", ["", "abc", "9" * 40, "-1", "1e3", "9" * 18])
def test_a_member_id_that_is_no_id_is_not_found(client, tenant, ada, member_id):
    assert client.post(_url(tenant, "remove/"), {"member": member_id}).status_code == 404


def test_another_tenants_console_is_not_found(client, tenant, ada, elsewhere):
    theirs = Membership.objects.get(user__username="oscar")

    response = client.post(_url(elsewhere.tenant, "remove/"), {"member": str(theirs.pk)})

    assert response.status_code == 404
    assert Membership.objects.filter(pk=theirs.pk).exists()


def test_a_viewers_posts_are_refused_and_change_nothing(client, tenant, owner, vic):
    invitation, _ = invitation_create(by=owner.user, tenant=tenant, email="heidi@example.com", role="viewer")

    answers = [
        client.post(_url(tenant, "role/"), {"member": str(owner.pk), "role": "viewer"}),
        client.post(_url(tenant, "remove/"), {"member": str(owner.pk)}),
        client.post(_url(tenant, "invite/"), {"email": "ivan@example.com", "role": "admin"}),
        client.post(_url(tenant, "invitations/cancel/"), {"invitation": str(invitation.pk)}),
        client.get(_url(tenant) + f"?remove={owner.pk}"),
    ]

    assert [answer.status_code for answer in answers] == [403] * 5
    assert Membership.objects.get(pk=owner.pk).role == Role.ADMIN
    assert Invitation.objects.get().revoked_at is None
    assert not Invitation.objects.filter(email="ivan@example.com").exists()


def test_a_post_without_the_csrf_token_is_refused(tenant, ada, grace):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)

    response = strict.post(_url(tenant, "remove/"), {"member": str(grace.pk)})

    assert response.status_code == 403
    assert Membership.objects.filter(pk=grace.pk).exists()


def test_a_get_of_a_form_address_changes_nothing(client, tenant, ada, grace):
    assert client.get(_url(tenant, "remove/") + f"?member={grace.pk}").status_code == 405
    assert Membership.objects.filter(pk=grace.pk).exists()


# The old addresses


@pytest.mark.parametrize("path", ["", "invite/", "invitations/revoke/", "role/", "remove/"])
def test_the_old_members_addresses_send_an_admin_to_the_console(client, tenant, ada, grace, path):
    answer = client.post(f"/accounts/members/{path}", {"member": str(grace.pk)})

    assert (answer.status_code, answer["Location"]) == (302, _url(tenant))
    assert Membership.objects.filter(pk=grace.pk).exists()


def test_the_old_members_address_sends_a_viewer_to_their_tenants_read_only_page(client, tenant, vic):
    answer = client.get("/accounts/members/")

    assert (answer.status_code, answer["Location"]) == (302, _url(tenant))


def test_the_old_members_address_sends_someone_of_no_tenant_to_the_consoles_start(client):
    client.force_login(UserFactory.create(username="nobody"))

    answer = client.get("/accounts/members/")

    assert (answer.status_code, answer["Location"]) == (302, "/console/")


# Cost


def test_the_page_takes_a_bounded_number_of_queries(client, tenant, ada, django_assert_max_num_queries):
    for n in range(30):
        person = UserFactory.create(username=f"person-{n}")
        MembershipFactory.create(user=person, tenant=tenant, role=Role.VIEWER)
        invitation_create(by=ada, tenant=tenant, email=f"invited-{n}@example.com", role="viewer")

    # session, person, their memberships, the people an admin may change, members, invitations
    with django_assert_max_num_queries(6):
        response = client.get(_url(tenant))

    assert response.content.decode().count('name="member"') == 31


def test_the_home_pages_navigation_offers_members_to_admins_only(tenant, owner, member):
    admin, viewer = Client(), Client()
    admin.force_login(owner.user)
    viewer.force_login(member.user)

    assert '<a href="/accounts/members/">Members</a>' in admin.get("/").content.decode()
    assert 'href="/accounts/members/"' not in viewer.get("/").content.decode()


def test_the_page_has_no_inline_script_or_style(client, tenant, ada, grace):
    text = client.get(_url(tenant) + f"?remove={grace.pk}").content.decode()

    assert " style=" not in text
    assert "<script" not in text
    assert re.search(r"<style(?! nonce=)", text) is None
