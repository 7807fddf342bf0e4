"""The SDK adapter against the real SDK server: it finds exactly the resources the SDK would read."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR

from mcp_gateway.kernel.registry import registry_load
from mcp_gateway.kernel.sdk import server_resource_finder
from mcp_gateway.pipeline.server import server_build

# What the SDK does with a read of each URI here, with no caller: reads it (a resource that needs
# none), finds it and runs its handler, which refuses for want of a caller (Gatehouse's resources
# read the caller's identity first: the list asks for authentication, the others meet a missing
# request context, which the guard answers as an internal error), or finds nothing.
READ = "read"
HANDLER_WANTS_AUTHENTICATION = "handler ran: -32001"
HANDLER_HAS_NO_REQUEST = f"handler ran: {INTERNAL_ERROR}"
NOT_FOUND = "not found"


@pytest.mark.parametrize(
    ("uri", "sdk_outcome"),
    [
        ("gatehouse://ontologies", HANDLER_WANTS_AUTHENTICATION),
        ("gatehouse://ontologies/any-id", HANDLER_HAS_NO_REQUEST),
        ("gatehouse://ontologies/any-id/datasets/orders", HANDLER_HAS_NO_REQUEST),
        ("gatehouse://ontologies/a/b/c/d", NOT_FOUND),
        ("gatehouse://ontologiesx", NOT_FOUND),
        ("test://static-text", READ),
        ("test://template/7/data", READ),
        ("test://template/%2Fetc/data", NOT_FOUND),
        ("test://nothing-here", NOT_FOUND),
    ],
)
async def test_it_finds_the_resources_the_sdk_would_read(uri, sdk_outcome):
    registry = registry_load(module_paths=["data_agent.toolset", "conformance_fixtures.toolset"])
    server = server_build(registry=registry)
    finds = await server_resource_finder(server=server)

    assert await _sdk_read_outcome(server, uri) == sdk_outcome
    assert finds(uri) is (sdk_outcome != NOT_FOUND)


async def _sdk_read_outcome(server, uri: str) -> str:
    try:
        await server.read_resource(uri)
    except ResourceNotFoundError:
        return NOT_FOUND
    except MCPError as error:
        return f"handler ran: {error.code}"
    return READ
