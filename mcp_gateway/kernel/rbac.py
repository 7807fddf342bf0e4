"""Scope checks: plain set logic in one place."""

from __future__ import annotations

from mcp_gateway.kernel.registry import ToolSpec


def missing_scopes(*, required: frozenset[str], granted: frozenset[str]) -> frozenset[str]:
    return required - granted


def tool_allowed(*, spec: ToolSpec, granted: frozenset[str]) -> bool:
    return not missing_scopes(required=spec.scopes, granted=granted)
