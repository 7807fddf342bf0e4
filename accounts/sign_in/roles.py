"""The role a person's claims give them in the tenant, as the tenant's provider maps them.

A claim is named by its path (``groups``; Keycloak's ``realm_access.roles``), and holds a list of
values or one string. Each value the map names gives a role; a person with several gets the
highest; with none, the provider's default role, or no role at all (they cannot sign in).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accounts.models import Role

# Highest first.
ROLE_ORDER = (Role.ADMIN, Role.CONTRIBUTOR, Role.VIEWER)
MAX_VALUES = 1_000
MAX_VALUE_CHARS = 500
MAP_LINE_UNREADABLE = "Line {number}: write the claim's value, '=', then a role ({roles})."
MAP_ROLE_UNKNOWN = "Line {number}: {role!r} is not a role; use {roles}."
MAP_VALUE_TWICE = "Line {number}: the value {value!r} is already mapped."


def claim_values(*, claims: Mapping[str, Any], claim: str) -> list[str]:
    """The string values of ``claim`` (a dotted path) in ``claims``: a list's strings, or the one
    string; nothing else counts."""
    node: Any = claims
    for part in claim.split("."):
        if not isinstance(node, Mapping):
            return []
        node = node.get(part)
    values = node if isinstance(node, list) else [node]
    return [v for v in values[:MAX_VALUES] if isinstance(v, str) and 0 < len(v) <= MAX_VALUE_CHARS]


def role_from_claims(
    *, claims: Mapping[str, Any], claim: str, role_map: Mapping[str, str], default_role: str
) -> Role | None:
    """The highest role any of the person's values is mapped to; else the default; else None."""
    mapped = {role_map[value] for value in claim_values(claims=claims, claim=claim) if value in role_map}
    for role in ROLE_ORDER:
        if role in mapped:
            return role
    return Role(default_role) if default_role else None


def role_map_parse(*, text: str) -> dict[str, str]:
    """The map an operator wrote, one ``value = role`` a line (blank lines and ``#`` comments
    skipped); ``ValueError`` naming the first line that is wrong."""
    roles = ", ".join(ROLE_ORDER)
    parsed: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        value, equals, role = line.rpartition("=")
        value, role = value.strip(), role.strip().lower()
        if not equals or not value or len(value) > MAX_VALUE_CHARS:
            raise ValueError(MAP_LINE_UNREADABLE.format(number=number, roles=roles))
        if role not in ROLE_ORDER:
            raise ValueError(MAP_ROLE_UNKNOWN.format(number=number, role=role, roles=roles))
        if value in parsed:
            raise ValueError(MAP_VALUE_TWICE.format(number=number, value=value))
        parsed[value] = role
    return parsed


def role_map_text(*, role_map: Mapping[str, str]) -> str:
    return "\n".join(f"{value} = {role}" for value, role in role_map.items())
