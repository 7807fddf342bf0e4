"""One registration policy for dynamic registration (RFC 7591) and its management endpoint
(RFC 7592), over real HTTP against Daphne on PostgreSQL: what a client may register or update to,
the bounds on what it sends, hostile bodies answered in the RFC 7591 error shape (never a 500),
and the audit rows for updates and deletes."""

from __future__ import annotations

import json

import pytest
from oauth2_provider.models import Application

from core.conf import gatehouse_settings
from core.models import AuditAction, AuditEvent, AuditOutcome
from oauth.registration_policy import (
    INVALID_CLIENT_METADATA,
    INVALID_REDIRECT_URI,
    REDIRECT_USERINFO,
    UNSAFE_REDIRECT,
)
from tests.e2e.harness import REDIRECT_URI

pytestmark = pytest.mark.django_db

CLIENT_NAME = "Registration policy client"
EVIL = "http://evil.com/cb"


def _metadata(**overrides: object) -> dict:
    return {
        "client_name": CLIENT_NAME,
        "redirect_uris": [REDIRECT_URI],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **overrides,
    }


async def _register(driver, **overrides: object) -> dict:
    response = await driver.http.post("/oauth/register/", json=_metadata(**overrides))
    assert response.status_code == 201, response.text
    return response.json()


def _auth(registration: dict) -> dict[str, str]:
    return {"Authorization": f"Bearer {registration['registration_access_token']}"}


def _management_path(registration: dict) -> str:
    return f"/oauth/register/{registration['client_id']}/"


def _refused(response, error: str, status: int = 400) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "error_description"}
    assert body["error"] == error
    return body


async def _nothing_named(name: str) -> bool:
    return not await Application.objects.filter(name=name).aexists()


async def test_an_update_cannot_store_a_redirect_uri_the_registration_refuses(driver):
    registration = await _register(driver)

    response = await driver.http.put(
        _management_path(registration),
        json=_metadata(redirect_uris=[REDIRECT_URI, EVIL]),
        headers=_auth(registration),
    )

    body = _refused(response, INVALID_REDIRECT_URI)
    assert body["error_description"] == f"{UNSAFE_REDIRECT} {EVIL}"
    application = await Application.objects.aget(client_id=registration["client_id"])
    assert application.redirect_uris == REDIRECT_URI
    event = await AuditEvent.objects.aget(
        client_id=registration["client_id"], action=AuditAction.CLIENT_UPDATED
    )
    assert event.outcome == AuditOutcome.DENIED
    assert event.detail["error"] == INVALID_REDIRECT_URI
    assert EVIL in event.detail["reason"]


@pytest.mark.parametrize("grant", ["password", "client_credentials", "implicit"])
@pytest.mark.parametrize("auth_method", ["none", "client_secret_basic"])
async def test_registration_refuses_grant_types_other_than_code_and_refresh(driver, grant, auth_method):
    name = f"Grant {grant} {auth_method}"
    response = await driver.http.post(
        "/oauth/register/",
        json=_metadata(client_name=name, grant_types=[grant], token_endpoint_auth_method=auth_method),
    )

    body = _refused(response, INVALID_CLIENT_METADATA)
    assert grant in body["error_description"]
    assert await _nothing_named(name)


async def test_an_update_cannot_switch_to_another_grant_type(driver):
    registration = await _register(driver)

    response = await driver.http.put(
        _management_path(registration),
        json=_metadata(grant_types=["client_credentials"]),
        headers=_auth(registration),
    )

    _refused(response, INVALID_CLIENT_METADATA)
    application = await Application.objects.aget(client_id=registration["client_id"])
    assert application.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE


async def test_registration_refuses_a_thousand_redirect_uris(driver):
    name = "Thousand callbacks"
    uris = [f"https://client.example/cb/{n}" for n in range(1000)]

    response = await driver.http.post(
        "/oauth/register/", json=_metadata(client_name=name, redirect_uris=uris)
    )

    body = _refused(response, INVALID_CLIENT_METADATA)
    assert str(gatehouse_settings.OAUTH_CLIENT_MAX_REDIRECT_URIS) in body["error_description"]
    assert await _nothing_named(name)


async def test_registration_accepts_as_many_redirect_uris_as_the_bound(driver):
    uris = [
        f"https://client.example/cb/{n}" for n in range(gatehouse_settings.OAUTH_CLIENT_MAX_REDIRECT_URIS)
    ]

    registration = await _register(driver, redirect_uris=uris)

    assert registration["redirect_uris"] == uris


async def test_registration_refuses_an_overlong_redirect_uri(driver):
    name = "Long callback"
    uri = "https://client.example/" + "a" * gatehouse_settings.OAUTH_CLIENT_MAX_REDIRECT_URI_LENGTH

    response = await driver.http.post(
        "/oauth/register/", json=_metadata(client_name=name, redirect_uris=[uri])
    )

    _refused(response, INVALID_REDIRECT_URI)
    assert await _nothing_named(name)


@pytest.mark.parametrize(
    "uri",
    [
        "https://user:pass@client.example/cb",
        "https://client.example@evil.example/cb",
        "http://u@127.0.0.1/cb",
    ],
)
async def test_registration_refuses_a_redirect_uri_with_userinfo(driver, uri):
    name = "Userinfo callback"

    response = await driver.http.post(
        "/oauth/register/", json=_metadata(client_name=name, redirect_uris=[uri])
    )

    body = _refused(response, INVALID_REDIRECT_URI)
    assert body["error_description"] == REDIRECT_USERINFO
    assert await _nothing_named(name)


@pytest.mark.parametrize(
    "uri",
    [
        "https://client.example/cb#frag",
        "https://client.example/cb http://evil.com/cb",
        "https://client.example/c\tb",
    ],
)
async def test_registration_refuses_fragments_and_whitespace_in_redirect_uris(driver, uri):
    name = "Odd callback"

    response = await driver.http.post(
        "/oauth/register/", json=_metadata(client_name=name, redirect_uris=[uri])
    )

    _refused(response, INVALID_REDIRECT_URI)
    assert await _nothing_named(name)


async def test_registration_refuses_an_overlong_client_name_or_metadata_string(driver):
    long_name = "n" * (gatehouse_settings.OAUTH_CLIENT_MAX_NAME_LENGTH + 1)
    response = await driver.http.post("/oauth/register/", json=_metadata(client_name=long_name))
    assert "client_name" in _refused(response, INVALID_CLIENT_METADATA)["error_description"]

    long_uri = "https://client.example/" + "l" * gatehouse_settings.OAUTH_CLIENT_MAX_METADATA_STRING_LENGTH
    response = await driver.http.post(
        "/oauth/register/", json=_metadata(client_name="Long logo", logo_uri=long_uri)
    )
    assert "logo_uri" in _refused(response, INVALID_CLIENT_METADATA)["error_description"]
    assert await _nothing_named("Long logo")


@pytest.mark.parametrize("value", ["bad\u0000name", "bad\ud800name"])
async def test_registration_refuses_a_nul_or_lone_surrogate_in_client_name(driver, value):
    body = json.dumps(_metadata(client_name=value))  # escaped as \\u0000 / \\ud800 in the JSON text

    response = await driver.http.post(
        "/oauth/register/", content=body.encode(), headers={"Content-Type": "application/json"}
    )

    _refused(response, INVALID_CLIENT_METADATA)


async def test_an_update_refuses_a_nul_in_client_name(driver):
    registration = await _register(driver)

    response = await driver.http.put(
        _management_path(registration),
        json=_metadata(client_name="bad\u0000name"),
        headers=_auth(registration),
    )

    _refused(response, INVALID_CLIENT_METADATA)
    application = await Application.objects.aget(client_id=registration["client_id"])
    assert application.name == CLIENT_NAME


async def test_a_ten_thousand_deep_body_is_invalid_metadata_not_a_500(driver):
    deep = b'{"client_name": "deep", "x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"

    response = await driver.http.post(
        "/oauth/register/", content=deep, headers={"Content-Type": "application/json"}
    )

    _refused(response, INVALID_CLIENT_METADATA)


async def test_a_ten_thousand_deep_update_is_invalid_metadata_not_a_500(driver):
    registration = await _register(driver)
    deep = b"[" * 10_000 + b"]" * 10_000

    response = await driver.http.put(
        _management_path(registration),
        content=deep,
        headers={**_auth(registration), "Content-Type": "application/json"},
    )

    _refused(response, INVALID_CLIENT_METADATA)


@pytest.mark.parametrize(
    "bad_bytes", [pytest.param(b"\xff", id="invalid-byte"), pytest.param(b"\xed\xa0\x80", id="surrogate")]
)
async def test_a_body_that_is_not_utf8_is_invalid_metadata(driver, bad_bytes):
    raw = b'{"client_name": "bad ' + bad_bytes + b' name", "redirect_uris": ["https://c.example/cb"]}'

    response = await driver.http.post(
        "/oauth/register/", content=raw, headers={"Content-Type": "application/json"}
    )

    _refused(response, INVALID_CLIENT_METADATA)
    assert not await Application.objects.filter(name__startswith="bad ").aexists()


async def test_an_oversize_body_is_refused_with_413_in_the_rfc_7591_shape(driver):
    name = "Oversize body"
    padding = "p" * 1000
    # Many strings each within every other bound: only the body's size is over its limit.
    metadata = _metadata(
        client_name=name,
        contacts=[padding] * (gatehouse_settings.OAUTH_REGISTRATION_MAX_BODY_BYTES // 1000 + 1),
    )

    response = await driver.http.post("/oauth/register/", json=metadata)

    _refused(response, INVALID_CLIENT_METADATA, status=413)
    assert await _nothing_named(name)


async def test_an_update_is_audited_with_the_names_of_the_fields_it_changed(driver):
    registration = await _register(driver)
    token = registration["registration_access_token"]
    new_uri = "https://client.example/new-callback"

    response = await driver.http.put(
        _management_path(registration),
        json=_metadata(client_name="Renamed client", redirect_uris=[REDIRECT_URI, new_uri]),
        headers=_auth(registration),
    )

    assert response.status_code == 200, response.text
    assert response.json()["redirect_uris"] == [REDIRECT_URI, new_uri]
    event = await AuditEvent.objects.aget(
        client_id=registration["client_id"], action=AuditAction.CLIENT_UPDATED
    )
    assert event.outcome == AuditOutcome.OK
    assert event.target == "Renamed client"
    assert event.detail["changed"] == ["client_name", "redirect_uris"]
    assert event.detail["redirect_uris"] == [REDIRECT_URI, new_uri]
    assert token not in json.dumps(event.detail)


async def test_a_delete_is_audited_and_keeps_the_client_id(driver):
    registration = await _register(driver)
    token = registration["registration_access_token"]

    response = await driver.http.delete(_management_path(registration), headers=_auth(registration))

    assert response.status_code == 204
    assert not await Application.objects.filter(client_id=registration["client_id"]).aexists()
    event = await AuditEvent.objects.aget(
        client_id=registration["client_id"], action=AuditAction.CLIENT_DELETED
    )
    assert event.outcome == AuditOutcome.OK
    assert event.target == CLIENT_NAME
    assert event.application_id is None  # the row it named is gone; the client id stays
    assert token not in json.dumps(event.detail)


async def test_an_update_or_delete_with_a_wrong_token_is_refused_and_audited(driver):
    registration = await _register(driver)
    wrong = {"Authorization": "Bearer not-the-registration-token"}

    updated = await driver.http.put(
        _management_path(registration), json=_metadata(redirect_uris=[EVIL]), headers=wrong
    )
    deleted = await driver.http.delete(_management_path(registration), headers=wrong)

    _refused(updated, "invalid_token", status=401)
    _refused(deleted, "invalid_token", status=401)
    assert await Application.objects.filter(client_id=registration["client_id"]).aexists()
    outcomes = [
        (event.action, event.outcome, event.detail["error"])
        async for event in AuditEvent.objects.filter(target=registration["client_id"]).order_by("pk")
    ]
    assert outcomes == [
        (AuditAction.CLIENT_UPDATED, AuditOutcome.DENIED, "invalid_token"),
        (AuditAction.CLIENT_DELETED, AuditOutcome.DENIED, "invalid_token"),
    ]


async def test_the_management_endpoint_still_reads_a_registration(driver):
    registration = await _register(driver)

    response = await driver.http.get(_management_path(registration), headers=_auth(registration))

    assert response.status_code == 200
    assert response.json()["client_id"] == registration["client_id"]
    assert response.json()["redirect_uris"] == [REDIRECT_URI]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_a_nul_in_the_management_path_is_refused_not_a_500(driver, method):
    response = await driver.http.request(
        method,
        "/oauth/register/a%00b/",
        json=_metadata() if method == "PUT" else None,
        headers={"Authorization": "Bearer garbage"},
    )

    _refused(response, "invalid_token", status=401)
