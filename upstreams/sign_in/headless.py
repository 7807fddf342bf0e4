"""A headless browser for an authorization server that approves at once (the conformance suite's):
it requests the authorization URL, follows no redirect, and reads the code, state and ``iss`` from
the redirect's ``Location``. Never used for a real upstream, whose server wants a person."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult

from upstreams.egress import upstream_http_client

TIMEOUT_SECONDS = 10.0
NOT_REDIRECTED = "the authorization server answered HTTP {status} without redirecting back"
REFUSED = "the authorization server refused: {error}"


async def headless_authorize(authorization_url: str) -> AuthorizationCodeResult:
    async with upstream_http_client(timeout=httpx2.Timeout(TIMEOUT_SECONDS)) as http:
        response = await http.get(authorization_url)
    location = response.headers.get("location")
    if not response.is_redirect or not location:
        raise OAuthFlowError(NOT_REDIRECTED.format(status=response.status_code))
    query = parse_qs(urlsplit(location).query)

    def first(name: str) -> str | None:
        values = query.get(name)
        return values[0] if values else None

    error = first("error")
    if error is not None:
        raise OAuthFlowError(REFUSED.format(error=error))
    return AuthorizationCodeResult(code=first("code") or "", state=first("state"), iss=first("iss"))
