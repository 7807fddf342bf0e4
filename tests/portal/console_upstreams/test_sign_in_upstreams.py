"""The console's upstreams page, for upstreams that sign in with OAuth (authorization code): the
list says whether Gatehouse holds the tokens a tenant admin's sign-in gave it (by whom, when; a
sign-in under way; why the last one failed), never a token, and its admins get a Connect button (a
POST with the CSRF token to ``console:upstream-connect``); a viewer sees the status only; the kind
is offered in the form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from core.crypto import secret_encrypt
from portal.console.upstreams import SAVED_TO_CONNECT
from tests.portal.console_upstreams.support import console_form, messages_of, upstreams_url
from tests.support.upstream_support import upstream_row
from upstreams.models import AuthKind, Upstream
from upstreams.sign_in.models import AttemptOutcome, UpstreamGrant

TOKENS = '{"access_token": "upstr3am-acc3ss-t0ken", "refresh_token": "upstr3am-r3fresh"}'

pytestmark = pytest.mark.django_db


def _sign_in_upstream(tenant) -> Upstream:
    return upstream_row(
        tenant=tenant.slug, name="crm", url="https://crm.example/mcp", auth=AuthKind.OAUTH_CODE, enabled=False
    )


def _connect_url(tenant) -> str:
    return reverse("console:upstream-connect", kwargs={"slug": tenant.slug, "name": "crm"})


def test_the_form_offers_oauth_sign_in_and_an_api_key_in_the_query(client, tenant, ada):
    page = client.get(upstreams_url(tenant)).content.decode()

    assert '<option value="oauth_code">OAuth sign-in (authorization code)</option>' in page
    assert '<option value="query">API key in the query</option>' in page


def test_an_unconnected_sign_in_upstream_shows_its_status_and_a_connect_button(client, tenant, ada):
    _sign_in_upstream(tenant)

    page = client.get(upstreams_url(tenant)).content.decode()

    assert '<span class="status-not-connected">not connected</span>' in page
    assert f'<form method="post" action="{_connect_url(tenant)}">' in page
    assert 'aria-label="Connect crm">Connect</button>' in page


def test_the_connect_button_posts_with_the_csrf_token(client, tenant, ada):
    _sign_in_upstream(tenant)

    page = client.get(upstreams_url(tenant)).content.decode()

    form = page.split(f'<form method="post" action="{_connect_url(tenant)}">', 1)[1].split("</form>", 1)[0]
    assert 'name="csrfmiddlewaretoken"' in form


def test_a_viewer_sees_the_status_but_no_connect_button(client, tenant, vic):
    _sign_in_upstream(tenant)

    page = client.get(upstreams_url(tenant)).content.decode()

    assert '<span class="status-not-connected">not connected</span>' in page
    assert _connect_url(tenant) not in page


def test_other_credentials_show_no_connect_button(client, tenant, ada):
    upstream_row(tenant=tenant.slug, name="crm", url="https://crm.example/mcp", enabled=False)

    page = client.get(upstreams_url(tenant)).content.decode()

    assert _connect_url(tenant) not in page
    assert "not connected" not in page


def test_a_connected_sign_in_upstream_says_by_whom_with_its_scope_and_offers_to_connect_again(
    client, tenant, ada
):
    grant = UpstreamGrant.objects.create(
        upstream=_sign_in_upstream(tenant),
        tokens_encrypted=secret_encrypt(plaintext=TOKENS),
        connected_by=ada,
        connected_at=timezone.now(),
        scope="crm.read",
    )

    page = client.get(upstreams_url(tenant)).content.decode()

    assert '<span class="status-connected">connected</span><span class="muted">by ada, ' in page
    assert '<span class="muted">scope <code>crm.read</code></span>' in page
    assert 'aria-label="Connect crm again">Connect again</button>' in page
    assert "upstr3am" not in page
    assert grant.tokens_encrypted not in page


def test_a_sign_in_under_way_is_said(client, tenant, ada):
    UpstreamGrant.objects.create(
        upstream=_sign_in_upstream(tenant),
        attempt_outcome=AttemptOutcome.PENDING,
        attempt_expires=timezone.now() + timedelta(minutes=5),
    )

    page = client.get(upstreams_url(tenant)).content.decode()

    assert '<span class="muted">a sign-in is under way</span>' in page


def test_why_the_last_sign_in_failed_is_said(client, tenant, ada):
    UpstreamGrant.objects.create(
        upstream=_sign_in_upstream(tenant),
        attempt_outcome=AttemptOutcome.FAILED,
        attempt_error="the authorization server refused: access_denied",
    )

    page = client.get(upstreams_url(tenant)).content.decode()

    assert "The last sign-in failed: the authorization server refused: access_denied" in page
    assert '<span class="status-not-connected">not connected</span>' in page


def test_an_enabled_sign_in_upstream_is_saved_untested_and_waits_for_its_admin(client, tenant, ada):
    response = client.post(
        upstreams_url(tenant, "add/"),
        console_form(name="crm", auth="oauth_code", enabled="on", protocol="handshake"),
    )

    stored = Upstream.objects.get(tenant=tenant, name="crm")
    assert response.status_code == 302
    assert messages_of(response) == [SAVED_TO_CONNECT.format(name="crm")]
    assert stored.enabled
    assert stored.last_tested is None
    assert stored.protocol == "handshake"
