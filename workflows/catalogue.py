"""What a caller may run: the commands of a context, as plain values the tools, the assistant and
the agent share (no ORM objects cross this line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ParameterInfo:
    name: str
    type: str  # string, integer, number, boolean or date
    required: bool
    description: str = ""
    default: Any = None


@dataclass(frozen=True)
class CommandInfo:
    """One command a caller may see: a workflow command or a built-in of the current context."""

    qualified_name: str  # context/Name
    description: str
    parameters: tuple[ParameterInfo, ...] = ()
    examples: tuple[str, ...] = ()
    # The scopes running it needs, beyond workflows:run (its tool's, or a query's).
    scopes: frozenset[str] = field(default_factory=frozenset)
