"""The OpenID provider the sign-in tests start (tests/support/oidc_op.py) does what a relying party
needs of a real one: authorization code with PKCE, state and nonce, an RS256 ID token carrying the
person's groups, and accounts that change at the provider between two sign-ins. A relying party of
a few lines over httpx plays Gatehouse's part."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
import pytest

from tests.support.oidc_op import (
    REFUSED_CREDENTIALS,
    REFUSED_DISABLED,
    OidcAccount,
    OidcClient,
    OpenIdProvider,
)

# No test here reads the database, but tests/e2e's demo fixture writes it, and pytest-django sets up
# the test database only for a run with a test that asks for it: so this module also runs alone.
pytestmark = pytest.mark.django_db

# Nothing listens there: the OP only sends the browser to it, and the test reads the redirect.
REDIRECT_URI = "http://127.0.0.1:9/accounts/oidc/acme/callback"
CLIENT = OidcClient(client_id="gatehouse-acme", client_secret="acme-op-secret", redirect_uris=(REDIRECT_URI,))
ALICE = OidcAccount(subject="acme-0001", email="alice@acme.test", name="Alice", groups=("gatehouse-admins",))
BOB = OidcAccount(subject="acme-0002", email="bob@acme.test", name="Bob", groups=("gatehouse-viewers",))


@pytest.fixture(scope="module")
def op(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenIdProvider]:
    with OpenIdProvider(
        clients=[CLIENT], accounts=[ALICE, BOB], workdir=tmp_path_factory.mktemp("oidc-op")
    ) as provider:
        yield provider


@pytest.fixture
def idp(op: OpenIdProvider) -> OpenIdProvider:
    """The OP with alice and bob as they were, whatever the test before changed."""
    op.set_accounts([ALICE, BOB])
    return op


@pytest.fixture(scope="module")
def discovery(op: OpenIdProvider) -> dict[str, Any]:
    document: dict[str, Any] = httpx.get(op.discovery_url).raise_for_status().json()
    return document


@dataclass(frozen=True)
class Authorization:
    """What the relying party keeps between sending the browser away and its return."""

    url: str
    state: str
    nonce: str
    verifier: str


def authorization_start(discovery: dict[str, Any], *, pkce: bool = True) -> Authorization:
    state, nonce, verifier = secrets.token_urlsafe(16), secrets.token_urlsafe(16), secrets.token_urlsafe(48)
    params = {
        "response_type": "code",
        "client_id": CLIENT.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": "openid email profile groups",
        "state": state,
        "nonce": nonce,
    }
    if pkce:
        digest = hashlib.sha256(verifier.encode()).digest()
        params["code_challenge"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        params["code_challenge_method"] = "S256"
    url = f"{discovery['authorization_endpoint']}?{urlencode(params)}"
    return Authorization(url=url, state=state, nonce=nonce, verifier=verifier)


def callback_params(response: httpx.Response) -> dict[str, str]:
    """The query the OP sends the browser back to the relying party with."""
    assert response.status_code in (302, 303), response.text
    location = response.headers["location"]
    assert location.startswith(f"{REDIRECT_URI}?"), location
    return {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}


def token_exchange(discovery: dict[str, Any], code: str, authorization: Authorization) -> httpx.Response:
    return httpx.post(
        discovery["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "code_verifier": authorization.verifier,
        },
        auth=(CLIENT.client_id, CLIENT.client_secret),
    )


def id_token_claims(op: OpenIdProvider, discovery: dict[str, Any], tokens: httpx.Response) -> dict[str, Any]:
    """The ID token's claims, its signature checked against the OP's published keys."""
    assert tokens.status_code == 200, tokens.text
    id_token = tokens.json()["id_token"]
    key = jwt.PyJWKClient(discovery["jwks_uri"]).get_signing_key_from_jwt(id_token)
    claims: dict[str, Any] = jwt.decode(
        id_token, key.key, algorithms=["RS256"], audience=CLIENT.client_id, issuer=op.issuer
    )
    return claims


def signed_in_claims(
    op: OpenIdProvider, discovery: dict[str, Any], http: httpx.Client, account: OidcAccount
) -> dict[str, Any]:
    authorization = authorization_start(discovery)
    params = callback_params(op.sign_in(http, authorization.url, login=account.email))
    assert params["state"] == authorization.state
    assert params["iss"] == op.issuer
    claims = id_token_claims(op, discovery, token_exchange(discovery, params["code"], authorization))
    assert claims["nonce"] == authorization.nonce
    return claims


def test_a_person_signs_in_and_the_id_token_says_who_they_are_and_their_groups(
    idp: OpenIdProvider, discovery: dict[str, Any]
) -> None:
    with httpx.Client() as http:
        claims = signed_in_claims(idp, discovery, http, ALICE)

    assert {name: claims[name] for name in ("sub", "email", "email_verified", "name", "groups")} == {
        "sub": "acme-0001",
        "email": "alice@acme.test",
        "email_verified": True,
        "name": "Alice",
        "groups": ["gatehouse-admins"],
    }


def test_an_authorization_without_pkce_is_refused(idp: OpenIdProvider, discovery: dict[str, Any]) -> None:
    authorization = authorization_start(discovery, pkce=False)

    with httpx.Client() as http:
        params = callback_params(http.get(authorization.url))

    assert (params["error"], params["state"]) == ("invalid_request", authorization.state)


def test_a_wrong_password_is_refused(idp: OpenIdProvider, discovery: dict[str, Any]) -> None:
    with httpx.Client() as http:
        response = idp.sign_in(http, authorization_start(discovery).url, login=ALICE.email, password="wrong")

    assert response.status_code == 401
    assert REFUSED_CREDENTIALS in response.text


def test_the_next_sign_in_sees_the_groups_changed_at_the_provider(
    idp: OpenIdProvider, discovery: dict[str, Any]
) -> None:
    # One browser: its session at the OP skips the login form the second time, and still the
    # claims are the account's as it is now.
    with httpx.Client() as http:
        signed_in_claims(idp, discovery, http, ALICE)
        idp.set_accounts([replace(ALICE, groups=("gatehouse-viewers", "finance")), BOB])
        claims = signed_in_claims(idp, discovery, http, ALICE)

    assert claims["groups"] == ["gatehouse-viewers", "finance"]


def test_a_person_disabled_at_the_provider_cannot_sign_in_again(
    idp: OpenIdProvider, discovery: dict[str, Any]
) -> None:
    with httpx.Client() as http:
        signed_in_claims(idp, discovery, http, BOB)
        idp.set_accounts([ALICE, replace(BOB, disabled=True)])
        # The session bob's browser holds at the OP no longer signs him in: he gets the form.
        response = idp.sign_in(http, authorization_start(discovery).url, login=BOB.email)

    assert response.status_code == 403
    assert REFUSED_DISABLED in response.text


def test_a_code_issued_before_the_account_was_disabled_is_refused(
    idp: OpenIdProvider, discovery: dict[str, Any]
) -> None:
    authorization = authorization_start(discovery)
    with httpx.Client() as http:
        params = callback_params(idp.sign_in(http, authorization.url, login=BOB.email))
    idp.set_accounts([ALICE, replace(BOB, disabled=True)])

    response = token_exchange(discovery, params["code"], authorization)

    assert (response.status_code, response.json()["error"]) == (400, "invalid_grant")
