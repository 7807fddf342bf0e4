"""The tool registry: each toolset is a self-contained module exposing ``toolset = Toolset(...)``.

Settings list the toolset modules (``GATEHOUSE_TOOLSETS``); the endpoint never changes when one
is added. Each tool declares the scopes it needs next to its code, and so does each group of
resources (by URI prefix); the request guard enforces both.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from mcp.server.mcpserver import MCPServer

from accounts.scopes import scope_definitions
from core.conf import gatehouse_settings
from mcp_gateway.kernel.federation import Federation
from mcp_gateway.kernel.tasks_2025_11_25 import TaskSource
from mcp_gateway.kernel.tool_tasks_2026_07_28 import TaskSupport

DEFAULT_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class ToolSpec:
    name: str
    handler: Callable[..., Awaitable[Any]]
    description: str
    scopes: frozenset[str]
    title: str | None = None
    read_only: bool = True
    # A function when the limit follows a setting: called for each call, so an override applies.
    timeout_seconds: float | Callable[[], float] = DEFAULT_TIMEOUT_SECONDS
    # Structured tools publish an output schema and return structured content.
    structured: bool = True
    # Expensive tools (LLM calls, long queries) get the tighter default rate limit.
    expensive: bool = False
    # Argument names the audit trail must never store (names that look secret are hidden anyway).
    secret_arguments: frozenset[str] = frozenset()
    # Whether a 2026-07-28 call runs as a task of the tasks extension
    # (``mcp_gateway.kernel.tool_tasks_2026_07_28``).
    task_support: TaskSupport = "forbidden"

    def timeout(self) -> float:
        """This call's time limit, in seconds."""
        return self.timeout_seconds() if callable(self.timeout_seconds) else self.timeout_seconds


@dataclass(frozen=True)
class ResourcePrefix:
    """A toolset's resources whose URIs start with ``uri``, and the scopes reading any of them needs.

    Resources are listed to every tenant that has the toolset whatever the token's scopes (a client
    learns what it could read after authorizing again); reading one needs ``scopes``.
    """

    uri: str
    scopes: frozenset[str] = frozenset()


def resource_prefix(*, uri: str, scopes: Iterable[str] = ()) -> ResourcePrefix:
    return ResourcePrefix(uri=uri, scopes=frozenset(scopes))


@dataclass(frozen=True)
class Toolset:
    """A self-contained group of tools (and optionally resources and prompts), enabled per tenant.

    ``install`` registers the toolset's resources, resource templates, prompts and completions on
    the SDK server; ``resources`` (URI prefixes, with the scopes reading needs) and ``prompts`` say
    which of them it owns, so a tenant that has not enabled the toolset neither sees nor reaches them.
    ``federation`` serves entries that are not the server's own but a tenant's other MCP servers'.
    ``tasks`` lets clients call some of its tools as MCP tasks (``mcp_gateway.kernel.tasks_2025_11_25``).
    """

    name: str
    description: str
    tools: tuple[ToolSpec, ...] = field(default_factory=tuple)
    enabled_by_default: bool = True
    install: Callable[[MCPServer], None] | None = None
    resources: tuple[ResourcePrefix, ...] = ()
    prompts: tuple[str, ...] = ()
    # Entries that come from elsewhere (another MCP server), per tenant (``federation``).
    federation: Federation | None = None
    # Its tools that run as MCP tasks, and those tasks (``mcp_gateway.kernel.tasks_2025_11_25``).
    tasks: TaskSource | None = None


def tool(
    *,
    name: str,
    description: str,
    scopes: Iterable[str],
    title: str | None = None,
    read_only: bool = True,
    timeout_seconds: float | Callable[[], float] = DEFAULT_TIMEOUT_SECONDS,
    structured: bool = True,
    expensive: bool = False,
    secret_arguments: Iterable[str] = (),
    task_support: TaskSupport = "forbidden",
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
            structured=structured,
            expensive=expensive,
            secret_arguments=frozenset(secret_arguments),
            task_support=task_support,
        )

    return decorate


class Registry:
    def __init__(self, toolsets: Iterable[Toolset]) -> None:
        self.toolsets = tuple(toolsets)
        self._tools: dict[str, ToolSpec] = {}
        self._toolset_of_tool: dict[str, str] = {}
        self._by_name: dict[str, Toolset] = {}
        known_scopes = set(scope_definitions())
        for toolset in self.toolsets:
            if toolset.name in self._by_name:
                raise ImproperlyConfigured(f"Two toolsets are named {toolset.name!r}.")
            self._by_name[toolset.name] = toolset
            for spec in toolset.tools:
                if spec.name in self._tools:
                    raise ImproperlyConfigured(f"Tool {spec.name!r} is defined by two toolsets.")
                _refuse_unknown_scopes(f"Tool {spec.name!r}", spec.scopes, known_scopes)
                self._tools[spec.name] = spec
                self._toolset_of_tool[spec.name] = toolset.name
            for prefix in toolset.resources:
                _refuse_unknown_scopes(f"Resource prefix {prefix.uri!r}", prefix.scopes, known_scopes)

    def toolset(self, name: str) -> Toolset | None:
        return self._by_name.get(name)

    def toolset_of_tool(self, name: str) -> str | None:
        return self._toolset_of_tool.get(name)

    def toolset_of_resource(self, uri: str) -> str | None:
        found = self._resource_prefix(uri)
        return found[0].name if found is not None else None

    def resource_scopes(self, uri: str) -> frozenset[str]:
        """The scopes reading the resource at ``uri`` needs (none for a URI no toolset owns)."""
        found = self._resource_prefix(uri)
        return found[1].scopes if found is not None else frozenset()

    def _resource_prefix(self, uri: str) -> tuple[Toolset, ResourcePrefix] | None:
        return next(
            ((t, p) for t in self.toolsets for p in t.resources if uri.startswith(p.uri)),
            None,
        )

    def toolset_of_prompt(self, name: str) -> str | None:
        return next((t.name for t in self.toolsets if name in t.prompts), None)

    def federations(self, *, enabled: frozenset[str]) -> tuple[Federation, ...]:
        """The federations of the toolsets in ``enabled``."""
        return tuple(t.federation for t in self.toolsets if t.federation is not None and t.name in enabled)

    def task_source(self, tool_name: str) -> TaskSource | None:
        """The task source that runs ``tool_name`` as a task, if its toolset has one that does."""
        toolset = self._by_name.get(self._toolset_of_tool.get(tool_name, ""))
        source = toolset.tasks if toolset is not None else None
        return source if source is not None and tool_name in source.tools else None

    def task_sources(self, *, enabled: frozenset[str]) -> tuple[TaskSource, ...]:
        """The task sources of the toolsets in ``enabled`` that run at least one of their tools."""
        return tuple(
            t.tasks
            for t in self.toolsets
            if t.tasks is not None and t.name in enabled and t.tasks.tools & {s.name for s in t.tools}
        )

    def default_enabled(self) -> frozenset[str]:
        return frozenset(t.name for t in self.toolsets if t.enabled_by_default)

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return tuple(self._tools.values())

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)


def _refuse_unknown_scopes(what: str, scopes: frozenset[str], known: set[str]) -> None:
    unknown = scopes - known
    if unknown:
        raise ImproperlyConfigured(f"{what} needs unregistered scopes {sorted(unknown)}.")


def registry_load(*, module_paths: Iterable[str]) -> Registry:
    toolsets = []
    for path in module_paths:
        module = import_module(path)
        toolset = getattr(module, "toolset", None)
        if not isinstance(toolset, Toolset):
            raise ImproperlyConfigured(f"Toolset module {path!r} must define `toolset = Toolset(...)`.")
        toolsets.append(toolset)
    return Registry(toolsets)


@functools.cache
def default_registry() -> Registry:
    """The registry of the toolsets this deployment serves (``GATEHOUSE_TOOLSETS``)."""
    return registry_load(module_paths=gatehouse_settings.GATEHOUSE_TOOLSETS)
