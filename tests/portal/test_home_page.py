"""The home page: never a bare Not Found; signed out, what this is and the address to paste into a
client; signed in, the person's active tenants and roles, and links to their own pages."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from tests.support.factories import AccessTokenFactory, ApplicationFactory, McpSessionFactory

pytestmark = pytest.mark.django_db


def test_signed_out_it_shows_the_mcp_address_and_a_way_to_sign_in(client: Client):
    response = client.get("/")

    assert response.status_code == 200
    page = response.content.decode()
    assert settings.MCP_RESOURCE_URL in page
    assert 'href="/accounts/login/?next=/"' in page
    assert "Your tenants" not in page


def test_signed_in_it_lists_the_person_s_active_tenants_and_roles_only(client: Client, owner, outsider):
    client.force_login(owner.user)
    page = client.get("/").content.decode()

    assert "Acme Test" in page
    assert "you are admin" in page
    assert "other-test" not in page
    assert 'href="/accounts/connected/"' in page
    assert 'href="/accounts/sessions/"' in page


def test_a_deactivated_tenant_is_not_listed(client: Client, owner):
    owner.tenant.is_active = False
    owner.tenant.save()
    client.force_login(owner.user)

    assert "You belong to no tenant yet" in client.get("/").content.decode()


def test_the_admin_s_view_site_link_leads_to_it(admin_client: Client):
    assert 'href="/"' in admin_client.get("/admin/").content.decode()


def test_the_admin_carries_gatehouse_s_name_and_one_oauth_section_without_id_tokens(admin_client: Client):
    page = admin_client.get("/admin/").content.decode()

    assert "Gatehouse administration" in page
    assert "Django OAuth Toolkit" not in page
    assert "Id tokens" not in page
    oauth_section = page.split("OAuth grants and tokens", 1)[1].split("</table>", 1)[0]
    assert "Applications" in oauth_section
    assert "Access tokens" in oauth_section


def test_signed_in_it_sums_up_the_person_s_connected_applications_and_live_sessions(
    client: Client, owner, outsider
):
    mine = AccessTokenFactory.create(
        membership=owner, application=ApplicationFactory.create(name="Claude Desktop")
    )
    McpSessionFactory.create(
        membership=owner, application=mine.application, client_name="claude-ai", client_version="0.1.0"
    )
    theirs = AccessTokenFactory.create(
        membership=outsider, application=ApplicationFactory.create(name="Theirs")
    )
    McpSessionFactory.create(membership=outsider, application=theirs.application, client_name="their-cli")
    client.force_login(owner.user)

    page = client.get("/").content.decode()

    connected = page.split('id="connected"', 1)[1].split("</ul>", 1)[0]
    assert "Claude Desktop" in connected
    assert "in Acme Test" in connected
    sessions = page.split('id="sessions"', 1)[1].split("</ul>", 1)[0]
    assert "claude-ai</bdi> 0.1.0" in sessions
    assert "Theirs" not in page
    assert "their-cli" not in page


def test_signed_in_with_nothing_connected_it_says_so(client: Client, owner):
    client.force_login(owner.user)

    page = client.get("/").content.decode()

    assert "No application is connected to your account." in page
    assert "No application holds a session open now." in page
