"""The sign-in page, the authorization endpoint and client registration refuse floods, say when to
retry, and leave one ``rate.limited`` row per refusal; other addresses and accounts keep their own
budget.

The server here sits behind one trusted proxy, so each test speaks from addresses of its own
(``X-Forwarded-For``) and never shares a counter with another test.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest

from core.errors import RATE_LIMITED
from core.models import AuditAction, AuditEvent, AuditOutcome, RateLimitRule, RateLimitScope
from portal.login import LOGIN_THROTTLED
from tests.e2e.conftest import _serve
from tests.e2e.harness import REDIRECT_URI, DaphneServer, parse_form
from tests.e2e.oauth_driver import OAuthDriver, pkce_pair
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

LIMIT = 2
PERIOD_SECONDS = 60


@pytest.fixture(scope="module")
def proxied_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    yield from _serve(tmp_path_factory, database_url, "proxied", TRUSTED_PROXY_COUNT="1")


@pytest.fixture
async def limit_rule() -> AsyncIterator[Callable[[RateLimitScope], Awaitable[None]]]:
    """An operator's rule, committed (the async ORM has its own connection) and removed after."""
    created: list[RateLimitRule] = []

    async def make(scope: RateLimitScope) -> None:
        created.append(
            await RateLimitRule.objects.acreate(scope=scope, limit=LIMIT, period_seconds=PERIOD_SECONDS)
        )

    yield make
    for rule in created:
        await rule.adelete()


@pytest.fixture
async def http(proxied_server) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=proxied_server.base_url, follow_redirects=False) as client:
        yield client


def _address() -> str:
    # 198.18.0.0/15 is for benchmarks, never a real client.
    return f"198.{18 + secrets.randbelow(2)}.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"


def _from(address: str, **headers: str) -> dict[str, str]:
    return {"X-Forwarded-For": address, "X-Request-Id": "e2e-" + secrets.token_hex(8), **headers}


async def _refusal_event(request_id: str) -> AuditEvent:
    events = [
        event
        async for event in AuditEvent.objects.filter(request_id=request_id).select_related("application")
    ]
    assert len(events) == 1, [(e.action, e.outcome) for e in events]
    [event] = events
    assert (event.action, event.outcome) == (AuditAction.RATE_LIMITED, AuditOutcome.DENIED)
    return event


def _retry_after(response: httpx.Response) -> int:
    seconds = int(response.headers["retry-after"])
    assert 1 <= seconds <= PERIOD_SECONDS
    return seconds


async def _login(
    http: httpx.AsyncClient, *, address: str, username: str, password: str, path: str = "/accounts/login/"
) -> httpx.Response:
    page = await http.get(path, headers=_from(address))
    fields = {**parse_form(page.text)["fields"], "username": username, "password": password}
    return await http.post(path, data=fields, headers=_from(address))


async def test_the_third_sign_in_attempt_for_one_account_from_one_address_is_refused_with_a_retry_time(
    http, limit_rule, committed
):
    await limit_rule(RateLimitScope.LOGIN)
    person = committed(UserFactory)
    address = _address()
    for _ in range(LIMIT):
        failed = await _login(http, address=address, username=person.username, password="wrong")
        assert failed.status_code == 200

    # Even the right password is not checked once the budget is spent.
    refused = await _login(http, address=address, username=person.username, password=DEFAULT_PASSWORD)
    assert refused.status_code == 429
    seconds = _retry_after(refused)
    assert LOGIN_THROTTLED.format(seconds=seconds) in refused.text
    assert "sessionid" not in refused.cookies
    # The page is the sign-in form again, the name kept.
    assert parse_form(refused.text, action="/accounts/login/")["fields"]["username"] == person.username

    event = await _refusal_event(refused.request.headers["x-request-id"])
    assert event.username == person.username
    assert event.ip == address
    assert event.target == "/accounts/login/"
    # The first refusal of the minute, written at once (later ones are counted: core.audit.refusals).
    assert event.detail == {"scope": "login", "retryAfterSeconds": seconds, "count": 1}


async def test_the_sign_in_budget_is_per_account_and_per_address(http, limit_rule, committed):
    await limit_rule(RateLimitScope.LOGIN)
    person = committed(UserFactory)
    address = _address()
    for _ in range(LIMIT):
        await _login(http, address=address, username=person.username, password="wrong")
    # The same name in other letter case is the same account.
    shouted = await _login(http, address=address, username=person.username.upper(), password="wrong")
    assert shouted.status_code == 429

    other_account = await _login(http, address=address, username="someone-else", password="wrong")
    assert other_account.status_code == 200
    other_address = await _login(
        http, address=_address(), username=person.username, password=DEFAULT_PASSWORD
    )
    assert other_address.status_code == 302


async def test_the_admin_sign_in_shares_the_budget_and_shows_the_same_refusal(http, limit_rule, committed):
    await limit_rule(RateLimitScope.LOGIN)
    operator = committed(UserFactory, is_staff=True)
    address = _address()
    for _ in range(LIMIT):
        await _login(http, address=address, username=operator.username, password="wrong")

    refused = await _login(
        http, address=address, username=operator.username, password=DEFAULT_PASSWORD, path="/admin/login/"
    )
    assert refused.status_code == 429
    assert LOGIN_THROTTLED.format(seconds=_retry_after(refused)) in refused.text
    event = await _refusal_event(refused.request.headers["x-request-id"])
    assert (event.username, event.target) == (operator.username, "/admin/login/")


async def test_authorization_is_counted_per_sign_in_and_a_refusal_goes_back_to_the_client(
    proxied_server, limit_rule
):
    """Shown failing before: the second request of one sign-in (its return from the login page)
    was counted, so the second sign-in's first request was refused, with a page the client never
    saw (it went on waiting)."""
    await limit_rule(RateLimitScope.AUTHORIZE)
    driver = OAuthDriver(proxied_server)
    try:
        client_id = await driver.register()
    finally:
        await driver.aclose()
    address = _address()

    async def sign_in_start(browser: httpx.AsyncClient) -> str:
        """A sign-in's requests: the authorization request, then its return after the login page
        and a reload (its session cookie kept by the browser); the URL it asked for."""
        _, challenge = pkce_pair()
        url = OAuthDriver(proxied_server).authorize_url(client_id=client_id, challenge=challenge)
        for _ in range(3):
            assert (await browser.get(url, headers=_from(address))).status_code == 302
        return url

    for _ in range(LIMIT):  # each sign-in in a browser of its own: LIMIT sign-ins, 3 requests each
        async with httpx.AsyncClient(base_url=proxied_server.base_url) as browser:
            await sign_in_start(browser)

    _, challenge = pkce_pair()
    state = "st-" + secrets.token_hex(4)
    url = OAuthDriver(proxied_server).authorize_url(client_id=client_id, challenge=challenge, state=state)
    async with httpx.AsyncClient(base_url=proxied_server.base_url) as browser:
        refused = await browser.get(url, headers=_from(address))
    # Back to the client, which stops waiting: RFC 6749's error, its state, and the issuer.
    assert refused.status_code == 302
    location = httpx.URL(refused.headers["location"])
    assert str(location).startswith(REDIRECT_URI)
    assert location.params["error"] == "temporarily_unavailable"
    assert location.params["state"] == state
    assert location.params["iss"] == proxied_server.public_url.rstrip("/")
    assert "try again in" in location.params["error_description"]

    event = await _refusal_event(refused.request.headers["x-request-id"])
    assert event.ip == address
    assert event.application is not None
    assert event.application.client_id == event.client_id == client_id
    # The first refusal of the minute, written at once (later ones are counted: core.audit.refusals).
    assert event.detail["scope"] == "authorize"
    assert event.detail["count"] == 1

    # A redirect URI the client never registered: nowhere to send it, so the endpoint's own answer.
    stranger = url.replace("redirect_uri=", "redirect_uri=https%3A%2F%2Fevil.example%2Fcb&x=")
    async with httpx.AsyncClient(base_url=proxied_server.base_url) as browser:
        unknown = await browser.get(stranger, headers=_from(address))
        page = await browser.get(
            f"/oauth/authorize/?client_id=nobody&code_challenge={challenge}",
            headers=_from(address, Accept="text/html,application/xhtml+xml"),
        )
    assert unknown.status_code == 429
    assert unknown.reason_phrase == "Too Many Requests"  # Twisted's table said "Unknown Status"
    seconds = _retry_after(unknown)
    body = unknown.json()
    assert body["error"] == "rate_limited"
    assert body["error_description"].startswith(RATE_LIMITED)
    assert f"Retry in {seconds} s." in body["error_description"]
    # A person's browser is shown a page rather than JSON.
    assert page.status_code == 429
    assert page.headers["content-type"].startswith("text/html")
    assert "Retry in" in page.text

    async with httpx.AsyncClient(base_url=proxied_server.base_url) as browser:
        assert (await browser.get(url, headers=_from(_address()))).status_code == 302


async def test_the_third_registration_from_one_address_is_refused_with_a_retry_time(http, limit_rule):
    await limit_rule(RateLimitScope.REGISTER)
    metadata = {
        "client_name": "Throttle test",
        "redirect_uris": ["http://127.0.0.1:9/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }
    address = _address()
    for _ in range(LIMIT):
        assert (await http.post("/oauth/register/", json=metadata, headers=_from(address))).status_code == 201

    refused = await http.post("/oauth/register/", json=metadata, headers=_from(address))
    assert refused.status_code == 429
    seconds = _retry_after(refused)
    assert refused.json()["error"] == "rate_limited"

    event = await _refusal_event(refused.request.headers["x-request-id"])
    assert event.ip == address
    # The first refusal of the minute, written at once (later ones are counted: core.audit.refusals).
    assert event.detail == {"scope": "register", "retryAfterSeconds": seconds, "count": 1}
    assert (
        await AuditEvent.objects.filter(
            action=AuditAction.CLIENT_REGISTERED, ip=address, outcome=AuditOutcome.OK
        ).acount()
        == LIMIT
    )

    other = await http.post("/oauth/register/", json=metadata, headers=_from(_address()))
    assert other.status_code == 201
