"""Gatehouse reaches an upstream with its own credential, never the caller's token (asserted at the
upstream, which records every request's headers), and says who the caller is only when the
upstream asks for it; the credential's value appears in no log line."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

import pytest

from accounts.models import Role
from core.crypto import secret_encrypt
from tests.e2e.conftest import person_of
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.upstream_fixtures import remote_fields
from tests.support.factories import MembershipFactory
from tests.support.upstream_support import UpstreamProcess, upstream_row

pytestmark = pytest.mark.django_db

HEADER_NAME = "X-Upstream-Key"
HEADER_VALUE = "gatehouse-own-upstream-key-7f3a9c"


def _headers_of(result: Any) -> dict[str, str]:
    assert not result.is_error, result
    structured = result.structured_content
    assert isinstance(structured, dict), result
    headers = structured.get("result", structured)
    assert isinstance(headers, dict)
    return {str(k).lower(): str(v) for k, v in headers.items()}


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_the_upstream_receives_gatehouse_s_header_and_never_the_caller_s_token(
    request, server, committed, transport: str
):
    process: UpstreamProcess = request.getfixturevalue(f"{transport}_upstream")
    committed(
        upstream_row,
        tenant="acme",
        name="keyed",
        auth="header",
        header_name=HEADER_NAME,
        header_value_encrypted=secret_encrypt(plaintext=HEADER_VALUE),
        **remote_fields(process),
    )
    records_before = len(process.records())

    async with minted_sdk_client(committed, server, Person("alice")) as (client, storage):
        received = _headers_of(await client.call_tool("received_headers", {}))
        await client.call_tool("echo", {"text": "recorded"})
    assert storage.tokens is not None
    caller_token = storage.tokens.access_token

    assert received[HEADER_NAME.lower()] == HEADER_VALUE
    assert "authorization" not in received
    assert "x-gatehouse-user" not in received
    assert "x-gatehouse-tenant" not in received
    recorded = [record["headers"] for record in process.records()[records_before:] if "headers" in record]
    assert recorded, "the upstream recorded no request"
    for headers in [received, *recorded]:
        assert headers.get(HEADER_NAME.lower()) == HEADER_VALUE
        assert not any(caller_token in value for value in headers.values()), headers
    assert HEADER_VALUE not in server.log()


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_the_caller_s_identity_is_passed_as_plain_headers_only_when_the_upstream_asks(
    request, server, committed, transport: str
):
    process: UpstreamProcess = request.getfixturevalue(f"{transport}_upstream")
    committed(upstream_row, tenant="acme", name="told", pass_identity=True, **remote_fields(process))
    committed(
        upstream_row,
        tenant="acme",
        name="untold",
        prefix_tools=True,
        pass_identity=False,
        **remote_fields(process),
    )

    async with minted_sdk_client(committed, server, Person("alice")) as (client, storage):
        told = _headers_of(await client.call_tool("received_headers", {}))
        untold = _headers_of(await client.call_tool("untold_received_headers", {}))
    assert storage.tokens is not None
    caller_token = storage.tokens.access_token

    assert (told["x-gatehouse-user"], told["x-gatehouse-tenant"]) == ("alice", "acme")
    assert "x-gatehouse-user" not in untold
    assert "x-gatehouse-tenant" not in untold
    for headers in (told, untold):
        assert "authorization" not in headers
        assert not any(caller_token in value for value in headers.values()), headers


async def test_a_username_beyond_ascii_reaches_the_upstream_percent_encoded(server, committed, http_upstream):
    membership = committed(MembershipFactory, role=Role.ADMIN, user__username="zoë+ünï@example.test")
    committed(
        upstream_row,
        tenant=membership.tenant.slug,
        name="told",
        pass_identity=True,
        **remote_fields(http_upstream),
    )

    async with minted_sdk_client(committed, server, person_of(membership)) as (client, _):
        told = _headers_of(await client.call_tool("received_headers", {}))

    assert told["x-gatehouse-user"] == quote("zoë+ünï@example.test", safe="@.+-_")
    assert unquote(told["x-gatehouse-user"]) == "zoë+ünï@example.test"
    assert told["x-gatehouse-tenant"] == membership.tenant.slug
