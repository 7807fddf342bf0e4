"""The console's doors: a tenant's people see its pages (admins with forms, others told why not),
anyone else gets a 404 for any tenant slug, hostile or not, and the switcher goes only to the
person's own tenants."""

from __future__ import annotations

import pytest

from accounts.models import Role
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_an_admin_sees_the_overview_and_members_without_a_read_only_note(client, tenant, ada):
    for path in (f"/console/{tenant.slug}/", f"/console/{tenant.slug}/members/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert 'role="note"' not in response.content.decode()
    assert client.get("/console/")["Location"] == f"/console/{tenant.slug}/"


def test_a_viewer_sees_the_pages_told_they_cannot_change_them(client, tenant):
    viewer = UserFactory.create(username="vic")
    MembershipFactory.create(user=viewer, tenant=tenant, role=Role.VIEWER)
    client.force_login(viewer)
    page = client.get(f"/console/{tenant.slug}/members/").content.decode()
    assert "Only the tenant&#x27;s admins change this; your role here is viewer." in page
    assert "Invite people" not in page


@pytest.mark.parametrize("slug", ["other-tenant", "nobody", "x" * 300, "%00", "ac%E2%80%AEme"])
def test_another_tenant_or_a_hostile_slug_is_a_404_page(client, tenant, ada, slug):
    TenantFactory.create(slug="other-tenant")
    response = client.get(f"/console/{slug}/")
    assert response.status_code == 404


def test_the_switcher_goes_to_the_persons_tenants_only(client, tenant, ada):
    second = TenantFactory.create(slug="second")
    MembershipFactory.create(user=ada, tenant=second, role=Role.VIEWER)
    page = client.get(f"/console/{tenant.slug}/").content.decode()
    assert 'value="second"' in page
    assert client.get("/console/?tenant=second")["Location"] == "/console/second/"
    assert client.get("/console/?tenant=%00")["Location"] == "/console/"


def test_signed_out_goes_to_the_sign_in_page(client, tenant):
    response = client.get(f"/console/{tenant.slug}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
