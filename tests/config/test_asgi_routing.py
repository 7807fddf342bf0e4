"""The deployed application's first routing step (``config.asgi.McpFirst``): the MCP endpoint's
path goes straight to it, as Channels' ``^mcp/?$`` sent it, and everything else (pages, the
lifespan, a path that only starts like it) to Channels and Django."""

from __future__ import annotations

from typing import Any

import pytest

from config.asgi import McpFirst


def _app(name: str, seen: list[str]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(name)

    return app


async def _nothing_received() -> dict[str, Any]:
    raise AssertionError("routing reads no body")


async def _nothing_sent(message: Any) -> None:
    raise AssertionError("routing sends nothing")


async def _routed(scope: dict[str, Any]) -> str:
    seen: list[str] = []
    await McpFirst(_app("mcp", seen), _app("routes", seen))(scope, _nothing_received, _nothing_sent)
    assert len(seen) == 1
    return seen[0]


@pytest.mark.parametrize(
    ("path", "root_path", "expected"),
    [
        ("/mcp", "", "mcp"),
        ("/mcp/", "", "mcp"),
        ("//mcp", "", "mcp"),
        ("/gatehouse/mcp", "/gatehouse", "mcp"),
        ("/mcpx", "", "routes"),
        ("/mcp/x", "", "routes"),
        ("/mcp//", "", "routes"),
        ("/MCP", "", "routes"),
        ("/mcp\n", "", "routes"),
        ("/mcp\x00", "", "routes"),
        ("/", "", "routes"),
        ("/oauth/token", "", "routes"),
        ("/gatehouse/other", "/gatehouse", "routes"),
        ("/other/mcp", "", "routes"),
    ],
)
async def test_the_mcp_path_goes_to_the_endpoint_and_everything_else_to_django(
    path: str, root_path: str, expected: str
) -> None:
    scope = {"type": "http", "path": path, "root_path": root_path}
    assert await _routed(scope) == expected


@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
async def test_what_is_not_http_goes_to_channels_whatever_its_path(kind: str) -> None:
    assert await _routed({"type": kind, "path": "/mcp"}) == "routes"
