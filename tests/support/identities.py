"""An ``Identity`` for tests that need a caller but no database row (a guard's decision, a bound)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.identity import Identity

ALICE = Identity(
    user_id=1,
    username="alice",
    tenant_id=10,
    tenant_slug="acme",
    tenant_name="Acme",
    role="admin",
    scopes=frozenset({"mcp:read"}),
    application_id=1,
    client_id="c",
    client_name="C",
    token_id=1,
)


def identity_without_rows(**overrides: Any) -> Identity:
    """Alice of acme, with ``overrides``."""
    return replace(ALICE, **overrides)
