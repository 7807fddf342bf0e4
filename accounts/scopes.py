"""The one table that maps roles to OAuth scopes.

Each scope names, in words, what it lets a client do (the consent page shows this text) and the
roles that may grant it. Toolsets that need their own scopes add rows with ``scope_register`` when
their module is loaded; nothing else decides which role gets which scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from accounts.models import Role


@dataclass(frozen=True)
class ScopeDefinition:
    name: str
    description: str
    roles: frozenset[Role]


SCOPE_READ = "mcp:read"
SCOPE_WRITE = "mcp:write"

_SCOPES: dict[str, ScopeDefinition] = {}


def scope_register(*, name: str, description: str, roles: Iterable[Role]) -> ScopeDefinition:
    definition = ScopeDefinition(name=name, description=description, roles=frozenset(roles))
    existing = _SCOPES.get(name)
    if existing is not None and existing != definition:
        raise ValueError(f"Scope {name!r} is already registered with a different definition.")
    _SCOPES[name] = definition
    return definition


scope_register(
    name=SCOPE_READ,
    description="See who you are and use read-only tools",
    roles=[Role.ADMIN, Role.CONTRIBUTOR, Role.VIEWER],
)
scope_register(
    name=SCOPE_WRITE,
    description="Use tools that change data or spend money on your behalf",
    roles=[Role.ADMIN, Role.CONTRIBUTOR],
)


def scope_definitions() -> dict[str, ScopeDefinition]:
    return dict(_SCOPES)


def scopes_for_role(*, role: str) -> frozenset[str]:
    return frozenset(name for name, definition in _SCOPES.items() if role in definition.roles)


def scopes_granted(*, requested: Iterable[str], role: str) -> list[str]:
    """The requested scopes this role may hold, in a stable order."""
    allowed = scopes_for_role(role=role)
    return sorted(set(requested) & allowed)


class RoleScopesBackend:
    """DOT scopes backend reading the table above, so metadata and consent never drift from RBAC."""

    def get_all_scopes(self) -> dict[str, str]:
        return {name: definition.description for name, definition in _SCOPES.items()}

    def get_available_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        return sorted(_SCOPES)

    def get_default_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        return sorted(_SCOPES)
