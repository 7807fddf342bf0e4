"""A capability the request needs and the client did not declare: -32021 on 2026-07-28 (whose
``data.requiredCapabilities`` is a ClientCapabilities object), the tool's own error before; tools
that can do without the client (``client_elicit_optional``) fall back on every version. And the
log level a 2026-07-28 request asked for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from mcp_gateway.pipeline.client_log import request_log_level
from mcp_gateway.pipeline.client_requests import (
    NO_ELICITATION,
    NO_SAMPLING,
    client_elicit,
    client_elicit_optional,
    client_sample,
)

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


class _Session:
    """A client that declared nothing."""

    def check_client_capability(self, capability: Any) -> bool:
        return False

    async def elicit_form(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("must not be asked")

    async def create_message(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("must not be asked")


def _ctx(version: str) -> Any:
    request_context = SimpleNamespace(session=_Session(), request_id=1, meta=None)
    return SimpleNamespace(protocol_version=version, request_context=request_context)


async def test_sampling_not_declared_on_2026_is_32021_naming_sampling():
    with pytest.raises(MCPError) as raised:
        await client_sample(_ctx("2026-07-28"), prompt="hi", max_tokens=5)
    assert raised.value.error.code == -32021
    assert raised.value.error.data == {"requiredCapabilities": {"sampling": {}}}


async def test_elicitation_not_declared_on_2026_is_32021_naming_elicitation():
    with pytest.raises(MCPError) as raised:
        await client_elicit(_ctx("2026-07-28"), message="Who?", schema=SCHEMA)
    assert raised.value.error.code == -32021
    assert raised.value.error.data == {"requiredCapabilities": {"elicitation": {}}}


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05"])
async def test_before_2026_the_tool_says_so_in_its_result(version):
    with pytest.raises(ToolError, match=NO_SAMPLING):
        await client_sample(_ctx(version), prompt="hi", max_tokens=5)
    with pytest.raises(ToolError, match=NO_ELICITATION):
        await client_elicit(_ctx(version), message="Who?", schema=SCHEMA)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
async def test_a_tool_that_can_do_without_the_user_falls_back_on_every_version(version):
    assert await client_elicit_optional(_ctx(version), message="Who?", schema=SCHEMA) is None


@pytest.mark.parametrize(
    ("meta", "level"),
    [
        (None, None),
        ({}, None),
        ({"io.modelcontextprotocol/logLevel": "info"}, "info"),
        ({"io.modelcontextprotocol/logLevel": "emergency"}, "emergency"),
        ({"io.modelcontextprotocol/logLevel": "loud"}, None),
        ({"io.modelcontextprotocol/logLevel": "INFO"}, None),
        ({"io.modelcontextprotocol/logLevel": 3}, None),
        ({"io.modelcontextprotocol/logLevel": ["info"]}, None),
        ({"io.modelcontextprotocol/logLevel": "info\x00"}, None),
        ({"logLevel": "info"}, None),
        ("info", None),
    ],
)
def test_the_log_level_a_request_asked_for(meta, level):
    assert request_log_level(meta=meta) == level
