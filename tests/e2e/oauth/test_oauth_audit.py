"""Every OAuth and sign-in event leaves exactly one audit row, through the real client and pages."""

from __future__ import annotations

import secrets

import httpx
import httpx2
import pytest

from core.models import AuditAction, AuditEvent, AuditOutcome
from tests.e2e.harness import DEMO_PASSWORD, REDIRECT_URI, Browser, Person, parse_form, sdk_client
from tests.e2e.oauth_driver import OAuthDriver, pkce_pair
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

E2E_CLIENT_NAME = "Gatehouse e2e client"


def _request_id() -> str:
    return "e2e-" + secrets.token_hex(8)


class _Stamps:
    """Gives every request its own X-Request-Id and remembers it by "METHOD /path"."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def stamp(self, method: str, path: str, headers: httpx.Headers | httpx2.Headers) -> str:
        request_id = _request_id()
        headers["x-request-id"] = request_id
        self.sent.append((f"{method} {path}", request_id))
        return request_id

    def request_ids(self, label: str) -> list[str]:
        return [request_id for sent, request_id in self.sent if sent == label]


class StampingSdkTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, stamps: _Stamps) -> None:
        super().__init__()
        self.stamps = stamps

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request_id = self.stamps.stamp(request.method, request.url.path, request.headers)
        response = await super().handle_async_request(request)
        assert response.headers["x-request-id"] == request_id
        return response


class StampingBrowserTransport(httpx.AsyncHTTPTransport):
    def __init__(self, stamps: _Stamps) -> None:
        super().__init__()
        self.stamps = stamps

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request_id = self.stamps.stamp(request.method, request.url.path, request.headers)
        response = await super().handle_async_request(request)
        assert response.headers["x-request-id"] == request_id
        return response


# The links, by name: a missing one reads as None and fails the comparison it is in.
def _user(event: AuditEvent) -> str | None:
    return event.user.username if event.user else None


def _tenant(event: AuditEvent) -> str | None:
    return event.tenant.slug if event.tenant else None


def _client(event: AuditEvent) -> str | None:
    return event.application.client_id if event.application else None


async def _events(request_id: str) -> list[AuditEvent]:
    return [
        event
        async for event in AuditEvent.objects.filter(request_id=request_id).select_related(
            "user", "tenant", "application"
        )
    ]


async def _only_event(request_id: str) -> AuditEvent:
    events = await _events(request_id)
    assert len(events) == 1, [(e.action, e.outcome) for e in events]
    return events[0]


async def test_a_whole_connection_audits_registration_login_consent_and_token_once_each(server):
    stamps = _Stamps()
    browser = Browser(server.base_url, transport=StampingBrowserTransport(stamps))
    try:
        async with sdk_client(
            server, Person("alice"), transport=StampingSdkTransport(stamps), browser=browser
        ) as (client, storage):
            await client.list_tools()
    finally:
        await browser.aclose()
    assert storage.client_info is not None
    client_id = storage.client_info.client_id

    [register_id] = stamps.request_ids("POST /oauth/register/")
    [login_id] = stamps.request_ids("POST /accounts/login/")
    [consent_id] = stamps.request_ids("POST /oauth/authorize/")
    [token_id] = stamps.request_ids("POST /oauth/token/")
    registered = await _only_event(register_id)
    signed_in = await _only_event(login_id)
    consented = await _only_event(consent_id)
    issued = await _only_event(token_id)

    assert (registered.action, registered.outcome) == (AuditAction.CLIENT_REGISTERED, AuditOutcome.OK)
    assert registered.target == E2E_CLIENT_NAME
    assert registered.detail == {"redirect_uris": [REDIRECT_URI], "registration_source": "dcr"}
    assert registered.user is None
    assert registered.tenant is None

    assert (signed_in.action, signed_in.outcome) == (AuditAction.LOGIN_SUCCEEDED, AuditOutcome.OK)
    assert _user(signed_in) == signed_in.username == "alice"
    # Signed in to connect this client, before choosing a tenant.
    assert signed_in.tenant is None

    assert (consented.action, consented.outcome) == (AuditAction.CONSENT_GRANTED, AuditOutcome.OK)
    assert _user(consented) == "alice"
    assert _tenant(consented) == "acme"
    assert sorted(consented.detail["scopes"]) == [
        "data_agent:write",
        "llm:invoke",
        "mcp:read",
        "mcp:write",
        "ontologies:read",
        "usage:read",
        "workflows:agent",
        "workflows:read",
        "workflows:run",
    ]

    assert (issued.action, issued.outcome) == (AuditAction.TOKEN_ISSUED, AuditOutcome.OK)
    assert _user(issued) == "alice"
    assert _tenant(issued) == "acme"
    assert issued.detail["grant_type"] == "authorization_code"

    for event in (registered, signed_in, consented, issued):
        assert _client(event) == event.client_id == client_id
        assert event.session_id == ""
        assert event.ip == "127.0.0.1"
    for action in (
        AuditAction.CLIENT_REGISTERED,
        AuditAction.LOGIN_SUCCEEDED,
        AuditAction.CONSENT_GRANTED,
        AuditAction.TOKEN_ISSUED,
    ):
        assert await AuditEvent.objects.filter(client_id=client_id, action=action).acount() == 1
    # Nothing secret reaches the trail.
    for event in (registered, signed_in, consented, issued):
        assert DEMO_PASSWORD not in str(event.detail)
        assert storage.tokens is not None
        assert storage.tokens.access_token not in str(event.detail)


async def _refresh(
    driver: OAuthDriver, *, client_id: str, refresh_token: str, request_id: str
) -> httpx.Response:
    return await driver.http.post(
        "/oauth/token/",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id},
        headers={"X-Request-Id": request_id},
    )


async def test_a_refresh_is_audited_as_token_refreshed_for_the_same_person_tenant_and_client(driver):
    tokens = await driver.token_for(Person("bob"))
    request_id = _request_id()
    response = await _refresh(
        driver, client_id=tokens["client_id"], refresh_token=tokens["refresh_token"], request_id=request_id
    )
    assert response.status_code == 200, response.text

    refreshed = await _only_event(request_id)
    assert (refreshed.action, refreshed.outcome) == (AuditAction.TOKEN_REFRESHED, AuditOutcome.OK)
    assert _user(refreshed) == "bob"
    assert _tenant(refreshed) == "acme"
    assert refreshed.client_id == tokens["client_id"]
    assert refreshed.detail["grant_type"] == "refresh_token"
    assert refreshed.ip == "127.0.0.1"


async def test_a_code_with_the_wrong_verifier_is_audited_as_a_failed_issue_without_any_secret(driver):
    client_id, code, verifier = await driver.code_for(Person("alice"))
    wrong, _ = pkce_pair()
    request_id = _request_id()
    response = await driver.http.post(
        "/oauth/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": wrong,
        },
        headers={"X-Request-Id": request_id},
    )
    assert response.status_code == 400

    failed = await _only_event(request_id)
    assert (failed.action, failed.outcome) == (AuditAction.TOKEN_ISSUED, AuditOutcome.ERROR)
    assert failed.detail == {"grant_type": "authorization_code", "error": "invalid_grant"}
    assert _client(failed) == failed.client_id == client_id
    assert failed.ip == "127.0.0.1"
    for secret in (code, verifier, wrong):
        assert secret not in str(failed.detail)
        assert secret not in failed.target


async def test_a_revoked_token_is_audited_once_and_an_unknown_one_not_at_all(driver):
    tokens = await driver.token_for(Person("alice"))

    async def revoke(token: str) -> str:
        request_id = _request_id()
        response = await driver.http.post(
            "/oauth/revoke/",
            data={"token": token, "client_id": tokens["client_id"]},
            headers={"X-Request-Id": request_id},
        )
        assert response.status_code == 200
        return request_id

    revoked = await _only_event(await revoke(tokens["access_token"]))
    assert (revoked.action, revoked.outcome) == (AuditAction.TOKEN_REVOKED, AuditOutcome.OK)
    assert _user(revoked) == "alice"
    assert _tenant(revoked) == "acme"
    assert revoked.client_id == tokens["client_id"]
    assert revoked.detail == {"by": "client", "kind": "access"}
    assert tokens["access_token"] not in revoked.target

    assert await _events(await revoke(tokens["access_token"])) == []
    assert await _events(await revoke("no-such-token")) == []


async def _sign_in(browser: Browser, *, client_id: str, driver: OAuthDriver, username: str, password: str):
    _, challenge = pkce_pair()
    start = await browser.client.get(driver.authorize_url(client_id=client_id, challenge=challenge))
    login_url = start.headers["location"]
    page = await browser.client.get(login_url)
    fields = {**parse_form(page.text)["fields"], "username": username, "password": password}
    request_id = _request_id()
    response = await browser.client.post(login_url, data=fields, headers={"X-Request-Id": request_id})
    return response, request_id


async def test_a_wrong_password_is_audited_as_a_failed_login_for_that_user_without_the_password(
    driver, browser
):
    client_id = await driver.register()
    response, request_id = await _sign_in(
        browser, client_id=client_id, driver=driver, username="alice", password="not-the-password"
    )
    assert response.status_code == 200

    failed = await _only_event(request_id)
    assert (failed.action, failed.outcome) == (AuditAction.LOGIN_FAILED, AuditOutcome.DENIED)
    assert _user(failed) == failed.username == "alice"
    assert failed.client_id == client_id
    assert failed.detail == {"reasons": ["invalid_login"]}
    assert "not-the-password" not in str(failed.detail)
    assert failed.ip == "127.0.0.1"


async def test_an_unknown_username_is_audited_as_a_failed_login_with_the_name_tried(driver, browser):
    client_id = await driver.register()
    username = "nobody-" + secrets.token_hex(4)
    _, request_id = await _sign_in(
        browser, client_id=client_id, driver=driver, username=username, password="whatever"
    )

    failed = await _only_event(request_id)
    assert (failed.action, failed.username, failed.user) == (AuditAction.LOGIN_FAILED, username, None)


async def test_a_denied_consent_is_audited_once_with_the_tenant_and_client(driver, browser):
    client_id, page = await driver.open_authorization(browser, Person("alice"))
    assert page.status_code == 200
    form = parse_form(page.text)
    request_id = _request_id()
    response = await browser.client.post(
        str(page.request.url),
        data={**form["fields"], "tenant": "acme"},
        headers={"X-Request-Id": request_id},
    )
    assert response.status_code == 302
    assert "error=access_denied" in response.headers["location"]

    denied = await _only_event(request_id)
    assert (denied.action, denied.outcome) == (AuditAction.CONSENT_DENIED, AuditOutcome.DENIED)
    assert _user(denied) == "alice"
    assert _tenant(denied) == "acme"
    assert denied.client_id == client_id
    assert sorted(denied.detail["scopes"]) == ["mcp:read", "mcp:write"]
    assert (
        await AuditEvent.objects.filter(client_id=client_id, action=AuditAction.CONSENT_GRANTED).acount() == 0
    )


async def test_a_consent_whose_role_grants_nothing_asked_for_is_audited_as_denied(driver, browser):
    client_id = await driver.register()
    _, challenge = pkce_pair()
    url = driver.authorize_url(client_id=client_id, challenge=challenge, scope="mcp:write")
    page = await browser.open(url, username="bob", password=DEMO_PASSWORD)
    request_id = _request_id()
    response = await browser.client.post(
        str(page.request.url),
        data={**parse_form(page.text)["fields"], "tenant": "acme", "allow": "Authorize"},
        headers={"X-Request-Id": request_id},
    )
    assert "error=access_denied" in response.headers["location"]

    denied = await _only_event(request_id)
    assert (denied.action, denied.outcome) == (AuditAction.CONSENT_DENIED, AuditOutcome.DENIED)
    assert _user(denied) == "bob"
    assert denied.detail == {"scopes": ["mcp:write"], "reason": "role"}


async def test_a_consent_form_for_another_tenant_reaches_no_decision_and_is_audited_as_tampered(
    driver, browser
):
    _, page = await driver.open_authorization(browser, Person("alice"))
    form = parse_form(page.text)
    request_id = _request_id()
    response = await browser.client.post(
        str(page.request.url),
        data={**form["fields"], "tenant": "globex", "allow": "Authorize"},
        headers={"X-Request-Id": request_id},
    )
    assert response.status_code == 400
    # Issue 13, item 8: no consent decision, but the altered form is on the record.
    event = await _only_event(request_id)
    assert event.action == AuditAction.CONSENT_TAMPERED
    assert event.outcome == AuditOutcome.DENIED


async def _admin_sign_in(server, *, username: str, password: str) -> tuple[httpx.Response, str]:
    async with httpx.AsyncClient(base_url=server.base_url, follow_redirects=False) as http:
        page = await http.get("/admin/login/?next=/admin/")
        assert page.status_code == 200
        fields = {**parse_form(page.text)["fields"], "username": username, "password": password}
        request_id = _request_id()
        response = await http.post(
            "/admin/login/?next=/admin/", data=fields, headers={"X-Request-Id": request_id}
        )
    return response, request_id


async def test_an_operator_signing_in_to_the_admin_is_audited(server, committed):
    operator = committed(UserFactory, is_staff=True)
    response, request_id = await _admin_sign_in(server, username=operator.username, password=DEFAULT_PASSWORD)
    assert response.status_code == 302
    assert response.headers["location"] == "/admin/"

    signed_in = await _only_event(request_id)
    assert (signed_in.action, signed_in.user_id, signed_in.application) == (
        AuditAction.LOGIN_SUCCEEDED,
        operator.pk,
        None,
    )


async def test_a_non_staff_member_refused_by_the_admin_sign_in_is_audited_as_a_failed_login(server):
    response, request_id = await _admin_sign_in(server, username="carol", password=DEMO_PASSWORD)
    assert response.status_code == 200

    failed = await _only_event(request_id)
    assert (failed.action, failed.outcome, _user(failed)) == (
        AuditAction.LOGIN_FAILED,
        AuditOutcome.DENIED,
        "carol",
    )
