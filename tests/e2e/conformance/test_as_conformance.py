"""The official conformance suite's authorization-server scenarios, against Gatehouse's real pages.

``@modelcontextprotocol/conformance`` 0.2.0-alpha.12 (pinned in ``tests/conformance/as-conformance``)
has an ``authorization`` command with two scenarios:

- ``authorization-server-metadata-endpoint`` fetches ``/.well-known/oauth-authorization-server``
  and checks status, content type, the required members, S256 and that ``issuer`` is the URL it
  was given (and, as a warning only, ``client_id_metadata_document_supported``).
- ``authorization-code-grant`` starts a callback server on ``http://127.0.0.1:PORT/callback``,
  prints an authorization URL (PKCE S256, ``state``, our ``resource``, no ``scope``) and waits for
  a browser to come back with a code; it then checks ``state`` and ``iss``, exchanges the code as
  a public client and checks the token response (JSON, ``Cache-Control: no-store``).

Nothing in Gatehouse approves anything on its own: the test registers the suite's client by
dynamic registration with that callback URI, reads the URL from the suite's output, and a
person (alice) signs in on the login page and allows the request on the consent page, through
the same scripted browser the other end-to-end tests use. Her browser is then sent to the
suite's callback, exactly as a real one would be. The suite's exit code decides the test, so any
regression in either scenario fails CI.
"""

from __future__ import annotations

import asyncio
import os
import re

import httpx
import pytest

from tests.e2e.harness import BASE_DIR, Browser, Person, free_port

pytestmark = pytest.mark.django_db

RUNNER = BASE_DIR / "tests" / "conformance" / "as-conformance"
SCENARIOS = ("authorization-server-metadata-endpoint", "authorization-code-grant")
# The suite itself is installed beforehand (make conformance-tools; tests/e2e/conformance/conftest.py).
SUITE_TIMEOUT_SECONDS = 600


async def _register(server, *, redirect_uri: str) -> str:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        response = await http.post(
            "/oauth/register/",
            json={
                "client_name": "MCP conformance suite",
                "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
        )
    assert response.status_code == 201, response.text
    return str(response.json()["client_id"])


async def _authorization_endpoint(server) -> str:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(f"{server.base_url}/.well-known/oauth-authorization-server")
    return str(response.json()["authorization_endpoint"])


async def _sign_in_and_allow(server, url: str, person: Person) -> None:
    """The person's part: sign in, allow, and let the browser follow the redirect to the suite."""
    browser = Browser(server.base_url)
    try:
        decided = await browser.authorize(url, username=person.username, password=person.password)
    finally:
        await browser.aclose()
    assert decided.status_code == 302, decided.text[:500]
    async with httpx.AsyncClient(timeout=30) as http:
        landed = await http.get(decided.headers["location"])
    assert landed.status_code == 200, landed.text[:500]


async def test_the_authorization_server_scenarios_pass_with_a_person_signing_in(server):
    assert RUNNER.exists(), f"the runner is expected at {RUNNER}"
    port = free_port()
    client_id = await _register(server, redirect_uri=f"http://127.0.0.1:{port}/callback")
    authorize_prefix = await _authorization_endpoint(server) + "?"

    process = await asyncio.create_subprocess_exec(
        "bash",
        str(RUNNER),
        "--url",
        server.public_url,
        "--client-id",
        client_id,
        "--resource",
        server.resource_url,
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert process.stdout is not None
    output: list[str] = []
    authorizations = 0

    async def follow() -> None:
        nonlocal authorizations
        assert process.stdout is not None
        async for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            output.append(line)
            if line.startswith(authorize_prefix):
                authorizations += 1
                await _sign_in_and_allow(server, line.strip(), Person("alice"))
        await process.wait()

    try:
        await asyncio.wait_for(follow(), timeout=SUITE_TIMEOUT_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    text = "\n".join(output)
    summary = text[text.find("=== SUMMARY ===") :]
    print(summary)  # shown with -s, and in the CI log when the test fails
    assert process.returncode == 0, text[-6000:]
    assert authorizations == 1, text[-6000:]
    for scenario in SCENARIOS:
        assert re.search(rf"✓ {re.escape(scenario)}: [1-9]\d* passed, 0 failed", summary), summary
    assert re.search(r"Total: [1-9]\d* passed, 0 failed", summary), summary
