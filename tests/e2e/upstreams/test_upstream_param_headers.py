"""An upstream's tool whose argument rides an ``Mcp-Param-*`` header: Gatehouse publishes the
annotation as the upstream does, and checks a 2026-07-28 call's headers against its body before
forwarding it, as the SDK's transport does for Gatehouse's own tools (which it alone knows);
handshake-era calls carry no such headers and are not asked for them."""

from __future__ import annotations

import pytest

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.param_headers import call_body, call_headers, member_token, post_call, refusal_of, result_of
from tests.e2e.raw_mcp import RawMcp, sse_messages
from tests.support.upstream_support import UpstreamProcess, upstream_row

pytestmark = pytest.mark.django_db

ROUTE = {"region": "us-west1"}


@pytest.fixture
def token_for(server, committed):
    def make() -> str:
        return member_token(server, committed, role="viewer", tenant="acme", scope="mcp:read")

    return make


@pytest.fixture
def header_upstream(server, committed, tmp_path):
    """acme's upstream ``ext`` over HTTP, serving ``route`` (``region`` rides Mcp-Param-Region)."""
    process = UpstreamProcess("http", workdir=tmp_path, options=("--header-tool",)).start()
    committed(upstream_row, tenant="acme", name="ext", url=process.url)
    yield process
    process.kill()


def _routed(process: UpstreamProcess) -> list[str]:
    return [r["region"] for r in process.records() if r.get("tool") == "route"]


async def test_a_call_whose_header_agrees_is_forwarded(server, header_upstream, token_for):
    token = token_for()
    result = result_of(
        await post_call(
            server, call_body(ROUTE, name="route"), call_headers(token, name="route", Region="us-west1")
        )
    )
    assert result["content"][0]["text"] == "routed to us-west1"
    assert _routed(header_upstream) == ["us-west1"]


@pytest.mark.parametrize("params", [{"Region": "eu-west1"}, {}, {"Region": "=?base64?dXMtd2VzdDE?="}])
async def test_a_call_whose_header_disagrees_never_reaches_the_upstream(
    server, header_upstream, token_for, params
):
    token = token_for()
    message = refusal_of(
        await post_call(server, call_body(ROUTE, name="route"), call_headers(token, name="route", **params))
    )
    assert message["id"] == 41
    assert "Mcp-Param-Region" in message["error"]["message"]
    assert _routed(header_upstream) == []


async def test_a_handshake_era_call_needs_no_header(server, header_upstream, token_for):
    raw = RawMcp(token_for())
    try:
        session_id = await raw.initialize(server.mcp_url)
        response = await raw.request(
            server.mcp_url, "tools/call", {"name": "route", "arguments": ROUTE}, session_id=session_id
        )
    finally:
        await raw.aclose()
    [message] = [m for m in sse_messages(response) if "result" in m or "error" in m]
    assert message["result"]["content"][0]["text"] == "routed to us-west1", message


async def test_the_official_client_sees_the_annotation_and_mirrors_it(server, committed, header_upstream):
    async with minted_sdk_client(committed, server, Person("alice"), mode="2026-07-28") as (client, _):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("route", {"region": "Grüße"})
    assert listed["route"].input_schema["properties"]["region"]["x-mcp-header"] == "Region"
    assert not result.is_error, result
    assert _routed(header_upstream) == ["Grüße"]
