"""Connecting an upstream that signs in with OAuth from the console (``portal.console.upstream_connect``):
ada, the tenant's admin, is sent to the upstream's authorization server and back, and Gatehouse keeps
the tokens, encrypted; vic, a viewer, may not start it; another tenant's upstream is not found; a
state that is no pending attempt's, hostile or not, is refused with the page's own 404."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections
from django.urls import reverse
from django.utils import timezone

from accounts.models import Membership, Role
from core.models import AuditAction, AuditEvent
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory
from tests.support.upstream_support import upstream_row
from tests.upstreams.sign_in_support import SignInServer, sign_in_server
from upstreams.models import AuthKind, Upstream
from upstreams.sign_in.connect import UNKNOWN_ATTEMPT
from upstreams.sign_in.models import AttemptOutcome, UpstreamGrant

CALLBACK = reverse("console:upstream-connected")


@pytest.fixture(autouse=True)
def _executor_connection_closed() -> Iterator[None]:
    """The connect thread's async ORM calls run in asgiref's one executor thread, which keeps a
    connection that would keep the test database from being dropped."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def vendor() -> Iterator[SignInServer]:
    with sign_in_server() as server:
        yield server


def _crm(tenant, url: str = "https://crm.example/mcp", *, name: str = "crm") -> Upstream:
    return upstream_row(tenant=tenant.slug, name=name, url=url, auth=AuthKind.OAUTH_CODE, enabled=False)


def _connect_url(tenant, name: str = "crm") -> str:
    return reverse("console:upstream-connect", kwargs={"slug": tenant.slug, "name": name})


def _pending(upstream: Upstream, *, by, state_hash: str = "0" * 64) -> UpstreamGrant:
    return UpstreamGrant.objects.create(
        upstream=upstream,
        attempt_id="a1",
        attempt_by=by,
        attempt_expires=timezone.now() + timedelta(minutes=5),
        attempt_state_hash=state_hash,
        attempt_outcome=AttemptOutcome.PENDING,
    )


@pytest.mark.django_db(transaction=True)
def test_an_admin_connects_and_gatehouse_keeps_the_tokens_encrypted(client, tenant, ada, vendor):
    upstream = _crm(tenant, vendor.url)

    sent = client.post(_connect_url(tenant))
    assert sent.status_code == 302
    authorization_url = sent["Location"]
    assert authorization_url.startswith(f"{vendor.base}/authorize?")
    state = parse_qs(urlsplit(authorization_url).query)["state"][0]

    back = client.get(CALLBACK, {"code": vendor.code_for(authorization_url), "state": state})

    assert back.status_code == 302
    assert back["Location"] == reverse("console:upstreams", kwargs={"slug": tenant.slug})
    grant = UpstreamGrant.objects.get(upstream=upstream)
    assert (grant.attempt_outcome, grant.connected_by, grant.connected) == (
        AttemptOutcome.CONNECTED,
        ada,
        True,
    )
    assert not any(token in grant.tokens_encrypted for token in vendor.tokens)
    audited = AuditEvent.objects.filter(action=AuditAction.UPSTREAM_CHANGED, target="crm").last()
    assert audited is not None
    assert audited.detail["change"] == "connected"


@pytest.mark.django_db(transaction=True)
def test_the_same_redirect_twice_finds_nothing_the_second_time(client, tenant, ada, vendor):
    _crm(tenant, vendor.url)
    authorization_url = client.post(_connect_url(tenant))["Location"]
    state = parse_qs(urlsplit(authorization_url).query)["state"][0]
    code = vendor.code_for(authorization_url)
    client.get(CALLBACK, {"code": code, "state": state})

    again = client.get(CALLBACK, {"code": code, "state": state})

    assert again.status_code == 404


def test_a_viewer_may_not_start_a_connection(client, tenant, vic):
    _crm(tenant)

    refused = client.post(_connect_url(tenant))

    assert refused.status_code == 403
    assert not UpstreamGrant.objects.exists()


def test_another_tenants_upstream_is_not_found(client, tenant, ada):
    other = TenantFactory.create(slug="other-tenant", name="Other")
    _crm(other)

    refused = client.post(_connect_url(other))

    assert refused.status_code == 404


def test_an_upstream_of_another_tenant_named_in_ones_own_tenant_is_not_found(client, tenant, ada):
    other = TenantFactory.create(slug="other-tenant", name="Other")
    _crm(other, name="theirs")

    refused = client.post(_connect_url(tenant, "theirs"))

    assert refused.status_code == 404


def test_an_upstream_without_sign_in_cannot_be_connected(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="plain", url="https://plain.example/mcp", enabled=False)

    refused = client.post(_connect_url(tenant, "plain"))

    assert refused.status_code == 422


def test_a_get_does_not_start_a_connection(client, tenant, ada):
    _crm(tenant)

    refused = client.get(_connect_url(tenant))

    assert refused.status_code == 405


def test_another_admins_attempt_under_way_is_a_conflict(client, tenant, ada):
    bea = UserFactory.create(username="bea")
    MembershipFactory.create(user=bea, tenant=tenant, role=Role.ADMIN)
    _pending(_crm(tenant), by=bea)

    refused = client.post(_connect_url(tenant))

    assert refused.status_code == 409
    assert "crm is being connected by bea" in refused.content.decode()


@pytest.mark.parametrize(
    "state",
    ["", "nope", "\u202eevil\u200b", "x" * 5000, "%ff"],
    ids=["empty", "unknown", "bidi", "huge", "percent"],
)
def test_a_state_that_is_no_pending_attempts_is_not_found(client, tenant, ada, state):
    _pending(_crm(tenant), by=ada)

    refused = client.get(CALLBACK, {"code": "c", "state": state})

    assert refused.status_code == 404
    assert UpstreamGrant.objects.get().attempt_outcome == AttemptOutcome.PENDING


def test_an_unknown_state_says_to_connect_again(client, tenant, ada):
    _pending(_crm(tenant), by=ada)

    refused = client.get(CALLBACK, {"code": "c", "state": "nope"})

    assert refused.status_code == 404
    assert UNKNOWN_ATTEMPT.split(":")[0] in refused.content.decode()


@pytest.mark.parametrize("query", ["code=c&state=%ff%fe", "code=c&state=a%00b"], ids=["invalid-utf8", "nul"])
def test_a_callback_no_lookup_could_survive_is_refused_as_a_page(client, tenant, ada, query):
    _pending(_crm(tenant), by=ada)

    refused = client.get(f"{CALLBACK}?{query}")

    assert refused.status_code == 400
    assert UpstreamGrant.objects.get().attempt_outcome == AttemptOutcome.PENDING


def test_another_persons_attempt_is_not_found_even_with_its_state(client, tenant, ada):
    bea = UserFactory.create(username="bea")
    MembershipFactory.create(user=bea, tenant=tenant, role=Role.ADMIN)
    _pending(_crm(tenant), by=bea, state_hash=hashlib.sha256(b"bea-state").hexdigest())

    refused = client.get(CALLBACK, {"code": "c", "state": "bea-state"})

    assert refused.status_code == 404
    assert UpstreamGrant.objects.get().attempt_outcome == AttemptOutcome.PENDING


def test_an_admin_demoted_since_starting_is_refused(client, tenant, ada):
    _pending(_crm(tenant), by=ada, state_hash=hashlib.sha256(b"ada-state").hexdigest())
    Membership.objects.filter(user=ada).update(role=Role.VIEWER)

    refused = client.get(CALLBACK, {"code": "c", "state": "ada-state"})

    assert refused.status_code == 403


def test_the_callback_wants_a_signed_in_person(client, tenant):
    answer = client.get(CALLBACK, {"code": "c", "state": "s"})

    assert answer.status_code == 302
    assert reverse("login") in answer["Location"]


@pytest.mark.django_db(transaction=True)
def test_the_scope_an_admin_configured_is_asked_for(client, tenant, ada, vendor):
    upstream_row(
        tenant=tenant.slug,
        name="crm",
        url=vendor.url,
        auth=AuthKind.OAUTH_CODE,
        oauth_scope="crm:read offline_access",
        enabled=False,
    )

    sent = client.post(_connect_url(tenant))

    assert parse_qs(urlsplit(sent["Location"]).query)["scope"] == ["crm:read offline_access"]


@pytest.mark.django_db(transaction=True)
def test_a_second_connect_by_the_same_admin_replaces_the_first(client, tenant, ada, vendor):
    _crm(tenant, vendor.url)
    first = client.post(_connect_url(tenant))["Location"]
    second = client.post(_connect_url(tenant))["Location"]
    first_state = parse_qs(urlsplit(first).query)["state"][0]

    stale = client.get(CALLBACK, {"code": vendor.code_for(first), "state": first_state})

    assert (stale.status_code, second != first) == (404, True)
