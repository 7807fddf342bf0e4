"""The tool registry: each toolset is a self-contained module exposing ``toolset = Toolset(...)``.

Settings list the toolset modules (``GATEHOUSE["TOOLSETS"]``); the endpoint never changes when one
is added. Each tool declares the scopes it needs next to its code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from accounts.scopes import scope_definitions

DEFAULT_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class ToolSpec:
    name: str
    handler: Callable[..., Awaitable[Any]]
    description: str
    scopes: frozenset[str]
    title: str | None = None
    read_only: bool = True
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS


@dataclass(frozen=True)
class Toolset:
    name: str
    description: str
    tools: tuple[ToolSpec, ...] = field(default_factory=tuple)


def tool(
    *,
    name: str,
    description: str,
    scopes: Iterable[str],
    title: str | None = None,
    read_only: bool = True,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> Callable[[Callable[..., Awaitable[Any]]], ToolSpec]:
    def decorate(handler: Callable[..., Awaitable[Any]]) -> ToolSpec:
        return ToolSpec(
            name=name,
            handler=handler,
            description=description,
            scopes=frozenset(scopes),
            title=title,
            read_only=read_only,
            timeout_seconds=timeout_seconds,
        )

    return decorate


class Registry:
    def __init__(self, toolsets: Iterable[Toolset]) -> None:
        self.toolsets = tuple(toolsets)
        self._tools: dict[str, ToolSpec] = {}
        known_scopes = set(scope_definitions())
        for toolset in self.toolsets:
            for spec in toolset.tools:
                if spec.name in self._tools:
                    raise ImproperlyConfigured(f"Tool {spec.name!r} is defined by two toolsets.")
                unknown = spec.scopes - known_scopes
                if unknown:
                    raise ImproperlyConfigured(
                        f"Tool {spec.name!r} needs unregistered scopes {sorted(unknown)}."
                    )
                self._tools[spec.name] = spec

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return tuple(self._tools.values())

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)


def registry_load(*, module_paths: Iterable[str]) -> Registry:
    toolsets = []
    for path in module_paths:
        module = import_module(path)
        toolset = getattr(module, "toolset", None)
        if not isinstance(toolset, Toolset):
            raise ImproperlyConfigured(f"Toolset module {path!r} must define `toolset = Toolset(...)`.")
        toolsets.append(toolset)
    return Registry(toolsets)
