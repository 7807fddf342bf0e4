"""The SDK adapter against the real SDK server: it finds exactly the resources the SDK would read."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from mcp_gateway.endpoint import server_build
from mcp_gateway.registry import registry_load
from mcp_gateway.sdk import server_resource_finder


@pytest.mark.parametrize(
    ("uri", "found"),
    [
        ("gatehouse://ontologies", True),
        ("gatehouse://ontologies/any-id", True),
        ("gatehouse://ontologies/any-id/datasets/orders", True),
        ("gatehouse://ontologies/a/b/c/d", False),
        ("gatehouse://ontologiesx", False),
        ("test://static-text", True),
        ("test://template/7/data", True),
        ("test://template/%2Fetc/data", False),
        ("test://nothing-here", False),
    ],
)
async def test_it_finds_the_resources_the_sdk_would_read(uri, found):
    registry = registry_load(module_paths=["data_agent.toolset", "mcp_gateway.toolsets.conformance"])
    server = server_build(registry=registry)
    finds = await server_resource_finder(server=server)

    assert finds(uri) is found
    assert found is await _sdk_reads(server, uri)


async def _sdk_reads(server, uri: str) -> bool:
    try:
        await server.read_resource(uri)
    except ResourceNotFoundError:
        return False
    except Exception:
        # Found, then failed for want of a caller: the lookup is all this compares.
        return True
    return True
