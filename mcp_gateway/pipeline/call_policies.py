"""Policies every tool call passes, however it is run: a client's call, a workflow command, a task's
step, a model's tool loop. The guard asks them after the toolset, scope and argument checks and
before the rate limit counts the call, so a new rule is added here once and the callers never
change.

A policy is an async callable taking ``identity``, ``tool`` and ``arguments`` by keyword; it refuses
by raising one of ``core.errors``' errors (the caller's client sees that error's own code and
message, and the audit trail records it as it records the guard's own refusals)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from core.identity import Identity


class CallPolicy(Protocol):
    def __call__(self, *, identity: Identity, tool: str, arguments: Mapping[str, Any]) -> Awaitable[None]: ...


_POLICIES: list[CallPolicy] = []


def call_policy_add(policy: CallPolicy) -> Callable[[], None]:
    """Adds a policy for every call from now on; returns the function that removes it again."""
    _POLICIES.append(policy)

    def remove() -> None:
        if policy in _POLICIES:
            _POLICIES.remove(policy)

    return remove


async def call_policies_check(*, identity: Identity, tool: str, arguments: Mapping[str, Any]) -> None:
    """Raises the first refusal of the policies, in the order they were added."""
    for policy in tuple(_POLICIES):
        await policy(identity=identity, tool=tool, arguments=arguments)
