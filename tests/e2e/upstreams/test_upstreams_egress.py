"""A call forwarded to an upstream whose address this deployment keeps upstreams from (here the cloud
metadata address; the test servers allow only loopback) fails with -32005 naming the upstream and
saying why, without the address, and no connection is made (upstreams.egress)."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from tests.e2e.harness import ACME_ADMIN_TOOLS, Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.support.upstream_support import upstream_row

pytestmark = pytest.mark.django_db

UPSTREAM_UNAVAILABLE = -32005


async def test_a_call_to_an_upstream_on_a_refused_address_gives_32005_with_the_reason(server, committed):
    committed(
        upstream_row,
        tenant="acme",
        name="metadata",
        url="http://169.254.169.254/latest/meta-data/mcp",
        prefix_tools=True,
        connect_timeout_seconds=5,
        # As if its last test had found them (saved before the address was refused, say).
        tool_names=["metadata_echo"],
    )
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        tools = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("metadata_echo", {"text": "hello?"})

    assert tools == ACME_ADMIN_TOOLS
    assert refused.value.code == UPSTREAM_UNAVAILABLE
    assert refused.value.message == (
        "The upstream MCP server 'metadata' is unavailable: its address is on a private network, which "
        "this deployment does not let upstreams reach (an operator allows private networks with "
        "UPSTREAM_PRIVATE_NETWORKS)"
    )
    assert refused.value.data == {"upstream": "metadata"}
