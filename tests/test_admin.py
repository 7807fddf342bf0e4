"""Operators manage tenants, users, memberships and OAuth applications in the Django admin."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import ApplicationFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

PAGES = [
    "admin:accounts_tenant_changelist",
    "admin:accounts_user_changelist",
    "admin:accounts_membership_changelist",
    "admin:oauth2_provider_application_changelist",
    "admin:oauth_accesstoken_changelist",
    "admin:oauth_refreshtoken_changelist",
    "admin:oauth_grant_changelist",
    "admin:mcp_gateway_mcpsession_changelist",
]


@pytest.fixture
def operator(client):
    user = UserFactory(username="operator", is_staff=True, is_superuser=True)
    client.force_login(user)
    return user


@pytest.mark.parametrize("page", PAGES)
def test_an_operator_can_open_every_page(client, operator, page):
    MembershipFactory()
    ApplicationFactory()
    assert client.get(reverse(page)).status_code == 200


@pytest.mark.parametrize("page", PAGES)
def test_a_non_staff_user_is_sent_to_the_login(client, page):
    client.force_login(UserFactory(username="plain"))
    response = client.get(reverse(page))
    assert response.status_code == 302
    assert "/admin/login/" in response["location"]


def test_an_operator_can_add_a_member_with_a_role(client, operator, tenant):
    person = UserFactory.create(username="newcomer")
    response = client.post(
        reverse("admin:accounts_membership_add"),
        {"user": person.pk, "tenant": tenant.pk, "role": "contributor"},
    )
    assert response.status_code == 302
    assert person.memberships.get().role == "contributor"


def test_the_same_person_cannot_join_a_tenant_twice(client, operator, member):
    response = client.post(
        reverse("admin:accounts_membership_add"),
        {"user": member.user.pk, "tenant": member.tenant.pk, "role": "admin"},
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
