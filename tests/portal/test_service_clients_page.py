"""The service clients page's old addresses, /accounts/service-clients/...: the page moved into the
console (tests/portal/test_console_clients.py), and each old address sends the person to the
clients of their first administered tenant there, acting on nothing it was sent."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from oauth.models import ServiceClient
from tests.support.factories import MembershipFactory, TenantFactory

pytestmark = pytest.mark.django_db

OLD_ADDRESSES = [
    "/accounts/service-clients/",
    "/accounts/service-clients/create/",
    "/accounts/service-clients/delete/",
]


@pytest.fixture
def browser(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


@pytest.mark.parametrize("address", OLD_ADDRESSES)
def test_each_old_address_sends_an_admin_to_the_consoles_clients(browser, owner, address):
    response = browser.get(address)

    assert response.status_code == 302
    assert response.headers["location"] == f"/console/{owner.tenant.slug}/clients/"


def test_the_first_administered_tenant_is_chosen_over_one_merely_joined(owner):
    # "A..." sorts first, but the person only views it.
    viewed = TenantFactory.create(slug="a-viewed", name="A viewed tenant")
    MembershipFactory.create(user=owner.user, tenant=viewed, role="viewer")
    browser = Client()
    browser.force_login(owner.user)

    response = browser.get("/accounts/service-clients/")

    assert response.headers["location"] == f"/console/{owner.tenant.slug}/clients/"


def test_a_form_posted_to_the_old_address_creates_nothing(browser, owner):
    response = browser.post(
        "/accounts/service-clients/create/", {"tenant": owner.tenant.slug, "name": "Job", "role": "viewer"}
    )

    assert response.status_code == 302
    assert not ServiceClient.objects.exists()


def test_a_viewer_is_sent_to_the_read_only_list(member):
    browser = Client()
    browser.force_login(member.user)

    response = browser.get("/accounts/service-clients/")

    assert response.headers["location"] == f"/console/{member.tenant.slug}/clients/"


def test_the_old_url_names_still_reverse():
    assert reverse("accounts:service-clients") == "/accounts/service-clients/"
    assert reverse("accounts:service-client-create") == "/accounts/service-clients/create/"
    assert reverse("accounts:service-client-delete") == "/accounts/service-clients/delete/"


def test_signed_out_visitors_are_sent_to_sign_in():
    response = Client().get("/accounts/service-clients/")

    assert response.status_code == 302
    assert "/accounts/login/" in response.headers["location"]


def test_the_home_page_links_an_admin_to_the_consoles_clients(owner):
    browser = Client()
    browser.force_login(owner.user)

    page = browser.get("/").content.decode()

    assert 'id="service-clients-link"' in page
    assert f'href="/console/{owner.tenant.slug}/clients/"' in page


def test_the_home_page_shows_no_clients_link_to_a_viewer(member):
    browser = Client()
    browser.force_login(member.user)

    assert 'id="service-clients-link"' not in browser.get("/").content.decode()
