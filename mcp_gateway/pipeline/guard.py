"""What stands between a JSON-RPC request and a tool, resource or prompt: the tenant's toolsets,
scopes, argument validation, the call policies every tool call passes (``call_policies``), rate
limits, time limits, and the translation of every failure into the error vocabulary
(``jsonrpc_errors.as_mcp_error``)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from core.db_turns import db_turns_for
from core.errors import InsufficientScope, InvalidInput
from core.identity import Identity
from core.models import RateLimitScope
from core.ratelimit.limits import rate_limit_call
from core.text_safety import surrogate_path
from mcp_gateway.kernel.federation import LIST_KEYS, LIST_METHODS, FederatedItem, Kind
from mcp_gateway.kernel.identity import current_request_reset, current_request_set, identity_from_request
from mcp_gateway.kernel.jsonrpc_errors import as_mcp_error
from mcp_gateway.kernel.rbac import missing_scopes, tool_allowed
from mcp_gateway.kernel.registry import Registry, ToolSpec
from mcp_gateway.kernel.sdk import server_resource_finder
from mcp_gateway.kernel.tool_headers import param_headers_check
from mcp_gateway.kernel.tool_tasks_2026_07_28 import TOOL_TASK_SCOPE_KEY
from mcp_gateway.kernel.toolset_access import toolsets_enabled_async
from mcp_gateway.pipeline.call_policies import call_policies_check
from mcp_gateway.pipeline.federated_entries import FederatedEntries

logger = logging.getLogger(__name__)

UNKNOWN_TOOL = "Unknown tool"
UNKNOWN_RESOURCE = "Unknown resource"
UNKNOWN_PROMPT = "Unknown prompt"
INVALID_ARGUMENTS = "Invalid arguments"
UNPAIRED_SURROGATE = "contains an unpaired surrogate (an invalid \\u escape), which is not valid Unicode"

# Federated tools' validators kept per process (each holds its listing's schema).
_FEDERATED_VALIDATORS_MAX = 2000

P = ParamSpec("P")
R = TypeVar("R")


def guarded_handler(spec: ToolSpec) -> Callable[..., Awaitable[Any]]:
    """The tool's handler under its time limit, with failures translated for the client.

    ``ToolError`` is the one exception that stays a tool result (``isError``): it is meant for the
    model to read and act on. Everything else becomes a JSON-RPC error.
    """

    @functools.wraps(spec.handler)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(spec.timeout()):
                return await spec.handler(*args, **kwargs)
        except ToolError:
            raise
        except Exception as error:
            raise as_mcp_error(error) from error

    return guarded


def guarded_resource(handler: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """A resource function with its failures translated for the client (``as_mcp_error``).

    The SDK passes ``MCPError`` through from a resource function but turns anything else into a
    generic -32603 before any middleware sees it, so, as for tools, the translation wraps the
    function itself. Put it under ``@server.resource(...)``.
    """

    @functools.wraps(handler)
    async def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await handler(*args, **kwargs)
        except Exception as error:
            raise as_mcp_error(error) from error

    return guarded


class RequestGuard:
    """SDK server middleware, run for every request before the SDK looks the method up."""

    def __init__(self, registry: Registry, server: MCPServer) -> None:
        self.registry = registry
        self.server = server
        self._validators: dict[str, Draft202012Validator] | None = None
        self._prompts: frozenset[str] | None = None
        self._finds_resource: Callable[[str], bool] | None = None
        self.federated = FederatedEntries(registry)
        self._federated_validators: dict[
            tuple[str, str], tuple[dict[str, Any], Draft202012Validator | None]
        ] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        try:
            if ctx.request_id is None or ctx.method in {"initialize", "ping"}:
                return await call_next(ctx)
            identity = identity_from_request(ctx.request)
            # The SDK runs handlers in tasks of its own: their database calls are the tenant's too.
            with db_turns_for(owner=identity.tenant_id):
                return await self._guarded(ctx, call_next, identity)
        except Exception as error:
            raise as_mcp_error(error) from error

    async def _guarded(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext, identity: Identity
    ) -> HandlerResult:
        enabled = await self._enabled(identity)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        federated: FederatedItem | None = None
        if ctx.method == "tools/call":
            # A tool task's own call was counted when the task started (the extension's layer).
            counted = TOOL_TASK_SCOPE_KEY not in getattr(ctx.request, "scope", {})
            federated = await self._check_call(params, identity, enabled, ctx.request, counted=counted)
        elif ctx.method == "resources/read":
            uri = str(params.get("uri", ""))
            toolset = self.registry.toolset_of_resource(uri)
            self._check_owned(toolset, enabled, UNKNOWN_RESOURCE)
            if toolset is None:
                federated = await self._federated(identity, enabled, "resource", uri)
            # Counted before the scope check (unlike a tool call): as when resources checked
            # their own scope.
            await rate_limit_call(identity=identity, scope=RateLimitScope.RESOURCE, target=uri)
            if federated is not None:
                _check_scopes(federated.scopes, identity)
            else:
                await self._check_read(uri, identity)
        elif ctx.method == "resources/subscribe":
            # As for reading it, without counting a read: the toolset on, the scopes held.
            uri = str(params.get("uri", ""))
            toolset = self.registry.toolset_of_resource(uri)
            self._check_owned(toolset, enabled, UNKNOWN_RESOURCE)
            if toolset is not None:
                await self._check_read(uri, identity)
        elif ctx.method == "prompts/get":
            name = str(params.get("name", ""))
            toolset = self.registry.toolset_of_prompt(name)
            self._check_owned(toolset, enabled, UNKNOWN_PROMPT)
            if toolset is None:
                federated = await self._federated(identity, enabled, "prompt", name)
                if federated is not None:
                    _check_scopes(federated.scopes, identity)
                elif name not in await self._prompt_names():
                    # The SDK's own refusal of an unknown prompt is a bare ValueError (-32603).
                    raise InvalidInput(f"{UNKNOWN_PROMPT}: {name}", data={"prompt": name})
        if federated is not None:
            return await federated.federation.forward(
                item=federated, identity=identity, params=params, ctx=ctx
            )
        # For a static resource's function, which the SDK gives no Context (``identity``).
        token = current_request_set(request=ctx.request)
        try:
            result = await call_next(ctx)
        finally:
            current_request_reset(token=token)
        if isinstance(result, dict):
            self._filter_listing(ctx.method, result, identity, enabled)
            kind = LIST_METHODS.get(ctx.method)
            if kind is not None:
                await self._add_federated(kind, result, identity, enabled)
        return result

    async def _federated(
        self, identity: Identity, enabled: frozenset[str], kind: Kind, name: str
    ) -> FederatedItem | None:
        return await self.federated.resolve(kind=kind, name=name, identity=identity, enabled=enabled)

    async def _add_federated(
        self, kind: Kind, result: dict[str, Any], identity: Identity, enabled: frozenset[str]
    ) -> None:
        entries = result.setdefault(LIST_KEYS[kind], [])
        for item in await self.federated.listed(kind=kind, identity=identity, enabled=enabled):
            if not missing_scopes(required=item.scopes, granted=identity.scopes):
                entries.append(item.payload)

    async def _enabled(self, identity: Identity) -> frozenset[str]:
        return await toolsets_enabled_async(tenant_id=identity.tenant_id, registry=self.registry)

    def _filter_listing(
        self, method: str, result: dict[str, Any], identity: Identity, enabled: frozenset[str]
    ) -> None:
        if method == "tools/list":
            result["tools"] = [
                t
                for t in result.get("tools", [])
                if self._tool_visible(str(t.get("name")), identity, enabled)
            ]
        elif method == "resources/list":
            result["resources"] = [
                r
                for r in result.get("resources", [])
                if self.registry.toolset_of_resource(str(r.get("uri"))) in enabled
            ]
        elif method == "resources/templates/list":
            result["resourceTemplates"] = [
                r
                for r in result.get("resourceTemplates", [])
                if self.registry.toolset_of_resource(str(r.get("uriTemplate"))) in enabled
            ]
        elif method == "prompts/list":
            result["prompts"] = [
                p
                for p in result.get("prompts", [])
                if self.registry.toolset_of_prompt(str(p.get("name"))) in enabled
            ]

    def _tool_visible(self, name: str, identity: Identity, enabled: frozenset[str]) -> bool:
        spec = self.registry.get(name)
        return (
            spec is not None
            and self.registry.toolset_of_tool(name) in enabled
            and tool_allowed(spec=spec, granted=identity.scopes)
        )

    @staticmethod
    def _check_owned(toolset: str | None, enabled: frozenset[str], message: str) -> None:
        # Another tenant's toolset is indistinguishable from one that does not exist.
        if toolset is not None and toolset not in enabled:
            raise InvalidInput(message)

    async def _check_call(
        self,
        params: dict[str, Any],
        identity: Identity,
        enabled: frozenset[str],
        request: Any,
        *,
        counted: bool = True,
    ) -> FederatedItem | None:
        name = str(params.get("name", ""))
        spec = self.registry.get(name)
        federated: FederatedItem | None = None
        if spec is None:
            federated = await self._federated(identity, enabled, "tool", name)
            if federated is None:
                raise InvalidInput(f"{UNKNOWN_TOOL}: {name}", data={"tool": name})
            _check_scopes(federated.scopes, identity)
            # The SDK's transport checked the Mcp-Param-* headers of the server's own tools only.
            param_headers_check(
                input_schema=federated.payload.get("inputSchema"),
                arguments=params.get("arguments") or {},
                request=request,
            )
            validator = self._federated_validator(federated)
        else:
            if self.registry.toolset_of_tool(name) not in enabled:
                raise InvalidInput(f"{UNKNOWN_TOOL}: {name}", data={"tool": name})
            _check_scopes(spec.scopes, identity)
            validator = (await self._tool_validators()).get(name)
        arguments = params.get("arguments") or {}
        problems = [
            {"path": "/" + "/".join(str(part) for part in error.absolute_path), "message": error.message}
            for error in (validator.iter_errors(arguments) if validator is not None else ())
        ]
        broken = surrogate_path(arguments)
        if broken is not None:
            # JSON's \udXXX escapes can carry what no UTF-8 text can; the tool's own models would
            # refuse it later, as a tool error rather than as the client's mistake.
            problems.append({"path": broken, "message": UNPAIRED_SURROGATE})
        if problems:
            # Validation happens here, before any tool code runs.
            raise InvalidInput(f"{INVALID_ARGUMENTS} for {name}", data={"tool": name, "errors": problems})
        await call_policies_check(identity=identity, tool=name, arguments=arguments)
        # Counted last: a call refused for its scope or arguments spends none of the caller's budget.
        if not counted:
            return federated
        await rate_limit_call(
            identity=identity,
            scope=RateLimitScope.TOOL,
            target=name,
            expensive=spec.expensive if spec is not None else False,
        )
        return federated

    async def _check_read(self, uri: str, identity: Identity) -> None:
        required = self.registry.resource_scopes(uri)
        # A URI the server has no resource for is the SDK's to refuse (-32602), whatever the scopes,
        # as an unknown tool is refused before its scopes are looked at.
        if not required or not await self._resource_exists(uri):
            return
        _check_scopes(required, identity)

    async def _resource_exists(self, uri: str) -> bool:
        if self._finds_resource is None:
            self._finds_resource = await server_resource_finder(server=self.server)
        return self._finds_resource(uri)

    def _federated_validator(self, item: FederatedItem) -> Draft202012Validator | None:
        """A validator for the input schema the source publishes (kept while its listing is); None
        when it publishes none a validator can use: the source then judges the arguments itself."""
        key = (item.source, item.name)
        cached = self._federated_validators.get(key)
        if cached is not None and cached[0] is item.payload:
            return cached[1]
        schema = item.payload.get("inputSchema")
        validator: Draft202012Validator | None = None
        if isinstance(schema, dict):
            try:
                Draft202012Validator.check_schema(schema)
                validator = Draft202012Validator(schema)
            except SchemaError:
                validator = None
        if len(self._federated_validators) > _FEDERATED_VALIDATORS_MAX:
            self._federated_validators.clear()
        self._federated_validators[key] = (item.payload, validator)
        return validator

    async def _prompt_names(self) -> frozenset[str]:
        if self._prompts is None:
            self._prompts = frozenset(prompt.name for prompt in await self.server.list_prompts())
        return self._prompts

    async def _tool_validators(self) -> dict[str, Draft202012Validator]:
        if self._validators is None:
            self._validators = {
                tool.name: Draft202012Validator(tool.input_schema) for tool in await self.server.list_tools()
            }
        return self._validators


def _check_scopes(required: frozenset[str], identity: Identity) -> None:
    missing = missing_scopes(required=required, granted=identity.scopes)
    if missing:
        raise InsufficientScope(required=required, missing=missing, over_stdio=identity.over_stdio)
