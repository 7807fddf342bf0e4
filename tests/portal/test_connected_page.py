"""A person's connected-applications page, in process: rows of one name told apart (when and how
the client registered, where it sends the person back to, when it was last used), permissions
listed once per row by name with their sentences behind a disclosure, a hostile client name
cleaned, escaped, isolated and cut, only the person's own connections, and no query per row.

The grouping, revoking and 404s of ``portal.connected`` are in tests/oauth/test_consent.py;
through Daphne and a real client, tests/e2e/oauth/test_connected_apps.py."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape
from oauth2_provider.models import Application

from accounts.models import Membership
from accounts.scopes import scope_definitions
from oauth.models import AccessToken, RememberedConsent
from portal.connected_display import destination_of
from tests.support.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    McpSessionFactory,
    MembershipFactory,
    RefreshTokenFactory,
    TenantFactory,
)

pytestmark = pytest.mark.django_db

CONNECTED = "/accounts/connected/"
NEWCOMER = "Newcomer SDK client"
DCR = Application.RegistrationSource.DCR


@pytest.fixture
def browser(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


def _visible(html: str) -> str:
    # What a person reads: the page without its tags, white space as one space.
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def _rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [row.split("</tr>", 1)[0] for row in body.split("<tr>")[1:]]


def _connect(
    membership: Membership,
    *,
    name: str = NEWCOMER,
    redirect_uris: str = "http://127.0.0.1:9/callback",
    registered: datetime | None = None,
    used: datetime | None = None,
    scope: str = "mcp:read mcp:write",
    source: str = DCR,
) -> Application:
    """A client that registered at ``registered`` and whose token the person last refreshed at ``used``."""
    application = ApplicationFactory.create(
        name=name, redirect_uris=redirect_uris, registration_source=source
    )
    if registered is not None:
        Application.objects.filter(pk=application.pk).update(created=registered)
    token = AccessTokenFactory.create(membership=membership, application=application, scope=scope)
    if used is not None:
        AccessToken.objects.filter(pk=token.pk).update(updated=used)
    return application


# --- telling rows of one name apart ----------------------------------------------------------------


def test_two_clients_of_one_name_differ_by_registration_redirect_host_and_last_use(browser, owner):
    now = timezone.now().replace(microsecond=0)
    _connect(
        owner,
        redirect_uris="http://127.0.0.1:53122/callback",
        registered=now - timedelta(days=2, hours=3),
        used=now - timedelta(hours=5),
    )
    _connect(
        owner,
        redirect_uris="https://newcomer.example/oauth/callback",
        registered=now - timedelta(days=1),
        used=now - timedelta(minutes=10),
    )

    recent, older = [_visible(row) for row in _rows(browser.get(CONNECTED).content.decode())]

    registered_recent, registered_older = now - timedelta(days=1), now - timedelta(days=2, hours=3)
    used_recent, used_older = now - timedelta(minutes=10), now - timedelta(hours=5)
    assert f"Registered {registered_recent:%Y-%m-%d %H:%M} UTC by itself (dynamic registration)" in recent
    assert "Sends you back to newcomer.example" in recent
    assert f"{used_recent:%Y-%m-%d %H:%M} UTC" in recent
    assert f"Registered {registered_older:%Y-%m-%d %H:%M} UTC by itself (dynamic registration)" in older
    assert "Runs on this computer" in older
    assert f"{used_older:%Y-%m-%d %H:%M} UTC" in older
    assert "newcomer.example" not in older


def test_loopback_ports_show_only_where_they_tell_namesakes_apart(browser, owner):
    _connect(owner, redirect_uris="http://127.0.0.1:53122/callback")
    _connect(owner, redirect_uris="http://localhost:60111/callback")
    _connect(owner, name="Alone", redirect_uris="http://127.0.0.1:3000/callback")

    page = _visible(browser.get(CONNECTED).content.decode())

    assert "Runs on this computer, port 53122" in page
    assert "Runs on this computer, port 60111" in page
    assert "3000" not in page


def test_namesakes_on_the_same_port_show_no_port(browser, owner):
    for _ in range(2):
        _connect(owner, redirect_uris="http://127.0.0.1:53122/callback")

    page = _visible(browser.get(CONNECTED).content.decode())

    assert page.count("Runs on this computer") == 2
    assert "53122" not in page


def test_seconds_show_only_when_namesakes_registered_in_the_same_minute(browser, owner):
    minute = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    _connect(owner, registered=minute + timedelta(seconds=7))
    _connect(owner, registered=minute + timedelta(seconds=41))
    _connect(owner, name="Alone", registered=minute + timedelta(seconds=12))

    page = _visible(browser.get(CONNECTED).content.decode())

    assert f"Registered {minute:%Y-%m-%d %H:%M}:07 UTC" in page
    assert f"Registered {minute:%Y-%m-%d %H:%M}:41 UTC" in page
    assert f"Registered {minute:%Y-%m-%d %H:%M} UTC" in page
    assert f"{minute:%H:%M}:12" not in page


def test_one_client_in_two_tenants_is_one_registration_shown_to_the_minute(browser, owner):
    application = _connect(owner)
    elsewhere = MembershipFactory.create(user=owner.user, tenant=TenantFactory.create(name="Globex Test"))
    AccessTokenFactory.create(membership=elsewhere, application=application)

    rows = [_visible(row) for row in _rows(browser.get(CONNECTED).content.decode())]

    assert len(rows) == 2
    assert {owner.tenant.name in rows[0], owner.tenant.name in rows[1]} == {True, False}
    shown = f"Registered {application.created:%Y-%m-%d %H:%M} UTC"
    assert all(shown in row for row in rows)


@pytest.mark.parametrize(
    ("source", "client_id", "said"),
    [
        pytest.param(DCR, "dcr-client", "by itself (dynamic registration)", id="dcr"),
        pytest.param(
            Application.RegistrationSource.CIMD,
            "https://docs.newcomer.example/oauth/client.json",
            "from its client ID metadata document at docs.newcomer.example",
            id="cimd",
        ),
        pytest.param(Application.RegistrationSource.MANUAL, "manual-client", "by an operator", id="operator"),
    ],
)
def test_each_row_says_how_its_client_registered(browser, owner, source, client_id, said):
    application = _connect(owner, source=source)
    Application.objects.filter(pk=application.pk).update(client_id=client_id)

    assert said in _visible(browser.get(CONNECTED).content.decode())


def test_the_redirect_host_is_the_one_the_browser_goes_to_never_the_userinfo(browser, owner):
    _connect(owner, redirect_uris="https://trusted.example@evil.example/cb")

    page = _visible(browser.get(CONNECTED).content.decode())

    assert "Sends you back to evil.example" in page
    assert "trusted.example" not in page


def test_many_redirect_hosts_are_named_up_to_three_and_counted_after(browser, owner):
    uris = " ".join(f"https://host-{n}.example/cb" for n in range(5))
    _connect(owner, redirect_uris=f"http://127.0.0.1:8/cb {uris}")

    page = _visible(browser.get(CONNECTED).content.decode())

    assert (
        "Runs on this computer; sends you back to host-0.example, host-1.example, host-2.example and 2 more"
        in page
    )


def test_where_redirect_uris_lead_is_each_place_once():
    destination = destination_of(
        redirect_uris=[
            "http://127.0.0.1:9000/a",
            "http://[::1]:9000/b",
            "http://localhost/c",
            "cursor://anysphere.cursor-mcp/oauth/callback",
            "https://app.example/one",
            "https://APP.example:443/two",
            "https://app.example:8443/three",
            "http://[broken/",
        ]
    )

    assert destination.on_this_computer
    assert destination.ports == (9000,)
    assert destination.schemes == ("cursor",)
    assert destination.hosts == ("app.example", "app.example:8443")


# --- permissions -----------------------------------------------------------------------------------


def test_permissions_show_once_per_row_by_name_with_their_sentences_behind_a_disclosure(browser, owner):
    definitions = scope_definitions()
    every = " ".join(sorted(definitions))
    for _ in range(2):
        _connect(owner, scope=every)

    rows = _rows(browser.get(CONNECTED).content.decode())

    assert len(rows) == 2
    for row in rows:
        shown, behind = row.split("<details>", 1)
        summary, sentences = behind.split("</summary>", 1)
        for name, definition in definitions.items():
            sentence = escape(definition.description)
            assert sentence not in shown
            assert sentence not in summary
            assert sentences.count(sentence) == 1
            assert summary.count(f"<code>{name}</code>") == 1


def test_a_scope_no_longer_defined_still_shows_by_name(browser, owner):
    _connect(owner, scope="mcp:read retired:scope")

    row = _visible(_rows(browser.get(CONNECTED).content.decode())[0])

    assert "retired:scope (no description)" in row


# --- hostile names ---------------------------------------------------------------------------------


def test_a_hostile_client_name_is_escaped_cleaned_isolated_and_cut(browser, owner):
    longest = Application._meta.get_field("name").max_length
    assert longest is not None
    _connect(owner, name="<script>alert(1)</script>\u202eevil")
    _connect(owner, name="zero\u200bwidth\u200b")
    _connect(owner, name="x" * longest)

    page = browser.get(CONNECTED).content.decode()

    assert "<script>alert(1)" not in page
    assert '<bdi class="client-name">&lt;script&gt;alert(1)&lt;/script&gt;evil</bdi>' in page
    assert '<bdi class="client-name">zerowidth</bdi>' in page
    assert "\u202e" not in page
    assert "\u200b" not in page
    assert "x" * 80 not in page
    assert f'<bdi class="client-name">{"x" * 79}…</bdi>' in page


def test_a_name_of_only_invisible_characters_shows_the_client_id(browser, owner):
    application = _connect(owner, name="\u202e\u200b\u2066")

    assert (
        f'<bdi class="client-name">{application.client_id}</bdi>' in browser.get(CONNECTED).content.decode()
    )


# --- only the person's own, and no query per row ---------------------------------------------------


def test_only_the_person_s_own_connections_are_listed(browser, owner, member, outsider):
    _connect(owner, name="Mine")
    _connect(member, name="Colleague's")
    _connect(outsider, name="Outsider's")

    page = _visible(browser.get(CONNECTED).content.decode())

    assert "1 connected application" in page
    assert "Mine" in page
    assert "Colleague" not in page
    assert "Outsider" not in page


def test_disconnecting_a_colleague_s_client_in_the_same_tenant_is_not_found(browser, member):
    theirs = _connect(member, name="Colleague's")

    response = browser.post(
        "/accounts/connected/disconnect/", {"client_id": theirs.client_id, "tenant": member.tenant.slug}
    )

    assert response.status_code == 404
    assert AccessToken.objects.filter(application=theirs).exists()


def _connections(owner: Membership, count: int) -> None:
    """``count`` connections of every kind: live tokens with refresh tokens and sessions, and
    remembered consents alone, across two tenants."""
    elsewhere = MembershipFactory.create(user=owner.user, tenant=TenantFactory.create())
    for n in range(count):
        membership = owner if n % 2 else elsewhere
        if n % 3 == 2:
            RememberedConsent.objects.create(
                user=owner.user,
                application=ApplicationFactory.create(),
                tenant=membership.tenant,
                scopes="mcp:read",
            )
            continue
        access = AccessTokenFactory.create(
            membership=membership, application__redirect_uris="https://a.example/cb"
        )
        RefreshTokenFactory.create(access_token=access)
        McpSessionFactory.create(membership=membership, application=access.application)


def test_the_page_reads_the_same_few_queries_for_many_rows_as_for_one(
    browser, owner, django_assert_max_num_queries
):
    _connections(owner, 1)
    with CaptureQueriesContext(connection) as one:
        assert len(_rows(browser.get(CONNECTED).content.decode())) == 1
    _connections(owner, 30)

    with django_assert_max_num_queries(len(one.captured_queries)):
        page = browser.get(CONNECTED).content.decode()

    assert len(_rows(page)) == 31
