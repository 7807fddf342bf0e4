"""Scope checks: plain set logic in one place, applied as SDK server middleware."""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_gateway.errors import GatehouseError, InsufficientScope, as_mcp_error
from mcp_gateway.identity import identity_from_request
from mcp_gateway.registry import Registry


def missing_scopes(*, required: frozenset[str], granted: frozenset[str]) -> frozenset[str]:
    return required - granted


class ScopeGate:
    """Refuses ``tools/call`` without the tool's scopes and hides such tools from ``tools/list``.

    It is also the one place where a GatehouseError raised while handling a request becomes a
    JSON-RPC error.
    """

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            if ctx.method == "tools/call":
                self._authorize_call(ctx)
            result = await call_next(ctx)
            if ctx.method == "tools/list" and isinstance(result, dict):
                granted = identity_from_request(ctx.request).scopes
                result["tools"] = [
                    entry
                    for entry in result.get("tools", [])
                    if self._allowed(name=entry.get("name"), granted=granted)
                ]
            return result
        except GatehouseError as error:
            raise as_mcp_error(error) from error

    def _allowed(self, *, name: Any, granted: frozenset[str]) -> bool:
        spec = self.registry.get(str(name))
        return spec is not None and not missing_scopes(required=spec.scopes, granted=granted)

    def _authorize_call(self, ctx: ServerRequestContext[Any, Any]) -> None:
        params = ctx.params or {}
        spec = self.registry.get(str(params.get("name", "")))
        if spec is None:
            return  # the SDK answers unknown tools itself
        granted = identity_from_request(ctx.request).scopes
        missing = missing_scopes(required=spec.scopes, granted=granted)
        if missing:
            raise InsufficientScope(required=spec.scopes, missing=missing)
