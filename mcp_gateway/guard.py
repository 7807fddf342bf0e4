"""What stands between a JSON-RPC request and a tool: scopes, argument validation, time limits, and
the translation of every failure into the error vocabulary (``errors.as_mcp_error``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from jsonschema import Draft202012Validator
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from mcp_gateway.errors import InsufficientScope, InvalidInput, as_mcp_error
from mcp_gateway.identity import identity_from_request
from mcp_gateway.rbac import missing_scopes, tool_allowed
from mcp_gateway.registry import Registry, ToolSpec

UNKNOWN_TOOL = "Unknown tool"
INVALID_ARGUMENTS = "Invalid arguments"


def guarded_handler(spec: ToolSpec) -> Callable[..., Awaitable[Any]]:
    """The tool's handler under its time limit, with failures translated for the client.

    ``ToolError`` is the one exception that stays a tool result (``isError``): it is meant for the
    model to read and act on. Everything else becomes a JSON-RPC error.
    """

    @functools.wraps(spec.handler)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(spec.timeout_seconds):
                return await spec.handler(*args, **kwargs)
        except ToolError:
            raise
        except Exception as error:
            raise as_mcp_error(error) from error

    return guarded


class RequestGuard:
    """SDK server middleware, run for every request before the SDK looks the method up."""

    def __init__(self, registry: Registry, server: MCPServer) -> None:
        self.registry = registry
        self.server = server
        self._validators: dict[str, Draft202012Validator] | None = None

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            if ctx.method == "tools/call":
                await self._check_call(ctx)
            result = await call_next(ctx)
            if ctx.method == "tools/list" and isinstance(result, dict):
                granted = identity_from_request(ctx.request).scopes
                result["tools"] = [entry for entry in result.get("tools", []) if self._listed(entry, granted)]
            return result
        except Exception as error:
            raise as_mcp_error(error) from error

    def _listed(self, entry: dict[str, Any], granted: frozenset[str]) -> bool:
        spec = self.registry.get(str(entry.get("name")))
        return spec is not None and tool_allowed(spec=spec, granted=granted)

    async def _check_call(self, ctx: ServerRequestContext[Any, Any]) -> None:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        name = str(params.get("name", ""))
        spec = self.registry.get(name)
        if spec is None:
            raise InvalidInput(f"{UNKNOWN_TOOL}: {name}", data={"tool": name})
        granted = identity_from_request(ctx.request).scopes
        missing = missing_scopes(required=spec.scopes, granted=granted)
        if missing:
            raise InsufficientScope(required=spec.scopes, missing=missing)
        arguments = params.get("arguments") or {}
        validator = (await self._tool_validators()).get(name)
        if validator is None:
            return
        problems = [
            {"path": "/" + "/".join(str(part) for part in error.absolute_path), "message": error.message}
            for error in validator.iter_errors(arguments)
        ]
        if problems:
            # Validation happens here, before any tool code runs.
            raise InvalidInput(f"{INVALID_ARGUMENTS} for {name}", data={"tool": name, "errors": problems})

    async def _tool_validators(self) -> dict[str, Draft202012Validator]:
        if self._validators is None:
            self._validators = {
                tool.name: Draft202012Validator(tool.input_schema) for tool in await self.server.list_tools()
            }
        return self._validators
