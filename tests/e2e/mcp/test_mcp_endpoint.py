"""The MCP endpoint's transport behaviour, seen from outside."""

from __future__ import annotations

import anyio
import httpx
import pytest

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_token(server, committed):
    return minted_token(committed, server, Person("alice"))


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_the_endpoint_answers_with_and_without_a_trailing_slash(server, alice_token, path):
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(
            f"{server.base_url}{path}",
            json=initialize_body(),
            headers={**MCP_HEADERS, "authorization": f"Bearer {alice_token}"},
        )
    assert response.status_code == 200
    # Nothing to stream before the answer, so it comes as plain JSON.
    assert response.headers["content-type"].startswith("application/json")
    assert "serverInfo" in response.json()["result"]
    assert response.headers["mcp-session-id"]


async def test_concurrent_callers_each_see_only_their_own_identity(server, committed):
    """Identity travels with each HTTP request; nothing global can mix two callers up."""
    people = [Person("alice"), Person("bob"), Person("carol")]
    seen: dict[str, set[tuple[str, str, str]]] = {person.username: set() for person in people}

    async def hammer(person: Person) -> None:
        async with minted_sdk_client(committed, server, person) as (client, _):
            for _ in range(10):
                result = await client.call_tool("whoami", {})
                content = result.structured_content
                assert content is not None
                seen[person.username].add(
                    (content["user"]["username"], content["tenant"]["slug"], content["role"])
                )

    async with anyio.create_task_group() as group:
        for person in people:
            group.start_soon(hammer, person)

    assert seen == {
        "alice": {("alice", "acme", "admin")},
        "bob": {("bob", "acme", "viewer")},
        "carol": {("carol", "globex", "admin")},
    }
