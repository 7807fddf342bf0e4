"""A person's sessions page, in process: each session told apart (client name and version, the
OAuth application, tenant, started, last seen, a short id), "End all" beside each session's own
"End", and every id that is not one of the person's live sessions answered 404, never 500.

Through Daphne and a real client: tests/e2e/oauth/test_connected_apps.py, and in Chromium
tests/e2e/browser/test_portal_pages.py."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from core.errors import NotFound
from core.identity import Identity
from core.models import AuditAction, AuditEvent
from mcp_gateway.kernel.sessions import session_new_id, session_open
from mcp_gateway.models import (
    CLIENT_NAME_MAX_LENGTH,
    CLIENT_VERSION_MAX_LENGTH,
    McpSession,
    TerminationReason,
)
from portal.connected import NO_SESSION, session_end_all_for_user, session_end_for_user
from portal.views import NO_SESSION_TO_END, SESSIONS_ENDED
from tests.support.factories import ApplicationFactory, McpSessionFactory, MembershipFactory

pytestmark = pytest.mark.django_db

SESSIONS = "/accounts/sessions/"
END = "/accounts/sessions/end/"
END_ALL = "/accounts/sessions/end-all/"


@pytest.fixture
def browser(owner) -> Client:
    browser = Client()
    browser.force_login(owner.user)
    return browser


def _live(session: McpSession) -> bool:
    return McpSession.objects.get(pk=session.pk).terminated_at is None


def _visible(html: str) -> str:
    # What a person reads: the page without its tags (a hidden input's value is not shown).
    return re.sub(r"<[^>]+>", " ", html)


# --- telling sessions apart ------------------------------------------------------------------------


def test_each_session_shows_its_client_application_tenant_times_and_a_short_id(browser, owner):
    application = ApplicationFactory.create(name="Claude Desktop")
    session = McpSessionFactory.create(
        membership=owner,
        application=application,
        id=session_new_id(),
        client_name="claude-ai",
        client_version="0.1.0",
        last_seen=timezone.now() - timedelta(minutes=5),
    )

    page = browser.get(SESSIONS).content.decode()

    assert '<bdi class="client-name">claude-ai</bdi>' in page
    assert '<bdi class="client-version">0.1.0</bdi>' in page
    assert "Claude Desktop" in page
    assert owner.tenant.name in page
    started, last_seen = page.split('<code class="short-id">', 1)[0].split("<time ")[-2:]
    assert started.startswith(f'datetime="{session.created:%Y-%m-%dT%H:%M:%S}')
    assert last_seen.startswith(f'datetime="{session.last_seen:%Y-%m-%dT%H:%M:%S}')
    assert (
        f'<span class="nowrap">{session.last_seen:%Y-%m-%d}</span> {session.last_seen:%H:%M} UTC' in last_seen
    )
    assert f'<code class="short-id">{session.pk[:8]}</code>' in page
    # The whole id is only the value the End button posts back, never shown.
    assert session.pk not in _visible(page)
    assert page.count(session.pk) == 1
    assert f'name="session" value="{session.pk}"' in page


def test_two_sessions_of_one_application_differ_by_client_and_short_id(browser, owner):
    application = ApplicationFactory.create(name="Cursor")
    first = McpSessionFactory.create(membership=owner, application=application, client_name="cursor-vscode")
    second = McpSessionFactory.create(membership=owner, application=application, client_name="cursor-cli")

    page = _visible(browser.get(SESSIONS).content.decode())

    assert "2 active sessions" in page
    for session in (first, second):
        assert session.client_name in page
        assert session.pk[:8] in page


def test_a_session_without_a_client_name_says_so(browser, owner):
    McpSessionFactory.create(membership=owner, client_name="", client_version="")

    assert "(no name given)" in browser.get(SESSIONS).content.decode()


def test_a_hostile_client_name_is_escaped_isolated_and_cut(browser, owner):
    McpSessionFactory.create(membership=owner, client_name="<script>alert(1)</script>\u202eevil")
    McpSessionFactory.create(membership=owner, client_name="x" * CLIENT_NAME_MAX_LENGTH)

    page = browser.get(SESSIONS).content.decode()

    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\u202eevil</bdi>" in page
    assert "x" * 80 not in page
    assert "x" * 79 + "…" in page


def test_session_open_cuts_what_a_client_declares_to_the_columns(owner):
    application = ApplicationFactory.create()
    identity = Identity(
        user_id=owner.user.pk,
        username=owner.user.username,
        tenant_id=owner.tenant.pk,
        tenant_slug=owner.tenant.slug,
        tenant_name=owner.tenant.name,
        role=owner.role,
        scopes=frozenset({"mcp:read"}),
        application_id=application.pk,
        client_id=application.client_id,
        client_name=application.name,
        token_id=1,
    )

    session = session_open(
        session_id=session_new_id(),
        identity=identity,
        protocol_version="2025-11-25",
        client_name="n" * 5000,
        client_version="v" * 5000,
        client_capabilities={},
    )

    session.refresh_from_db()
    assert session.client_name == "n" * CLIENT_NAME_MAX_LENGTH
    assert session.client_version == "v" * CLIENT_VERSION_MAX_LENGTH
    created = AuditEvent.objects.get(action=AuditAction.SESSION_CREATED)
    assert created.target == session.client_name
    assert created.detail["clientVersion"] == session.client_version


# --- End all ---------------------------------------------------------------------------------------


def test_end_all_is_a_form_that_posts_with_a_csrf_token(browser, owner):
    McpSessionFactory.create(membership=owner)

    page = browser.get(SESSIONS).content.decode()

    form = page.split(f'action="{END_ALL}"', 1)[1].split("</form>", 1)[0]
    assert 'name="csrfmiddlewaretoken"' in form
    assert '<button type="submit"' in form
    assert ">End all</button>" in form


def test_end_all_ends_every_live_session_of_the_person_each_audited(browser, owner, outsider):
    mine = [McpSessionFactory.create(membership=owner) for _ in range(3)]
    other_tenant = MembershipFactory.create(user=owner.user, role="viewer")
    mine.append(McpSessionFactory.create(membership=other_tenant))
    theirs = McpSessionFactory.create(membership=outsider)
    already = McpSessionFactory.create(
        membership=owner, terminated_at=timezone.now(), termination_reason=TerminationReason.CLIENT
    )

    response = browser.post(END_ALL, follow=True)

    assert response.redirect_chain == [(SESSIONS, 302)]
    page = response.content.decode()
    assert SESSIONS_ENDED.format(count=4, plural="s") in page
    assert "No application holds a session open now." in page
    assert not any(_live(session) for session in mine)
    assert {McpSession.objects.get(pk=s.pk).termination_reason for s in mine} == {TerminationReason.OWNER}
    assert _live(theirs)
    assert McpSession.objects.get(pk=already.pk).termination_reason == TerminationReason.CLIENT
    ended = AuditEvent.objects.filter(action=AuditAction.SESSION_TERMINATED)
    assert sorted(ended.values_list("session_id", flat=True)) == sorted(s.pk for s in mine)
    assert {event.detail["reason"] for event in ended} == {"owner"}
    assert {event.user_id for event in ended} == {owner.user.pk}


def test_end_all_twice_ends_nothing_the_second_time(browser, owner):
    McpSessionFactory.create(membership=owner)
    browser.post(END_ALL)

    response = browser.post(END_ALL, follow=True)

    assert NO_SESSION_TO_END in response.content.decode()
    assert AuditEvent.objects.filter(action=AuditAction.SESSION_TERMINATED).count() == 1


def test_end_all_leaves_a_session_idle_past_its_lifetime_to_expire(owner, settings):
    idle = McpSessionFactory.create(membership=owner, last_seen=timezone.now() - timedelta(days=30))

    assert session_end_all_for_user(user=owner.user) == 0
    assert _live(idle), "not listed on the page, so not the person's to end; the purge ends it as expired"


def test_end_all_needs_a_post_with_a_csrf_token(owner):
    session = McpSessionFactory.create(membership=owner)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner.user)

    assert strict.get(END_ALL).status_code == 405
    assert strict.post(END_ALL).status_code == 403
    assert _live(session)


def test_end_all_signed_out_goes_to_sign_in_and_ends_nothing(client, owner):
    session = McpSessionFactory.create(membership=owner)

    response = client.post(END_ALL)

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")
    assert _live(session)


# --- ids that are not the person's -----------------------------------------------------------------


def test_another_tenant_s_session_is_not_found_and_stays_live(browser, outsider):
    theirs = McpSessionFactory.create(membership=outsider, id=session_new_id())

    for value in (theirs.pk, theirs.pk[:8]):
        response = browser.post(END, {"session": value}, HTTP_ACCEPT="text/html")
        assert response.status_code == 404
        assert NO_SESSION in response.content.decode()
    assert _live(theirs)


def test_another_person_s_session_in_the_same_tenant_is_not_found(browser, owner, member):
    theirs = McpSessionFactory.create(membership=member)

    response = browser.post(END, {"session": theirs.pk})

    assert response.status_code == 404
    assert response.json()["error_description"] == NO_SESSION
    assert _live(theirs)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("abc\x00def", id="nul"),
        pytest.param("s" * 100_000, id="huge"),
        pytest.param("' OR 1=1 --", id="quote"),
    ],
)
def test_a_hostile_session_value_is_not_found(browser, owner, value):
    mine = McpSessionFactory.create(membership=owner)

    response = browser.post(END, {"session": value}, HTTP_ACCEPT="text/html")

    assert response.status_code == 404
    assert NO_SESSION in response.content.decode()
    assert _live(mine)


def test_invalid_utf8_and_a_missing_field_are_not_found(browser, owner):
    mine = McpSessionFactory.create(membership=owner)

    form = "application/x-www-form-urlencoded"
    invalid = browser.post(END, b"session=%FF%FE%00", content_type=form)
    # A surrogate encoded as UTF-8 (CESU-8) is invalid UTF-8 too.
    surrogate = browser.post(END, b"session=%ED%A0%80abc", content_type=form)
    missing = browser.post(END, {})

    assert (invalid.status_code, surrogate.status_code, missing.status_code) == (404, 404, 404)
    assert _live(mine)


def test_the_service_refuses_a_lone_surrogate_as_no_session(owner):
    # No form can carry one (the request body is decoded with replacement); a caller in code can.
    with pytest.raises(NotFound, match=NO_SESSION):
        session_end_for_user(user=owner.user, session_id="\ud800abc")
