"""Gatehouse's upstream client as the client under test of the official MCP conformance suite
(``conformance client``; ``manage.py upstream_conformance_client``).

The suite starts a scenario's server and runs a command with its URL. Here that command registers
a temporary upstream of the ``conformance`` tenant pointing at it, saved through
``upstream_save`` (so it is validated and tested exactly as an operator's would be), and then does
what a member's MCP client would make Gatehouse do: list the tenant's tools, resources and prompts
through the federation's catalog, call the tools and read the resources through the same pooled
sessions ``UpstreamFederation.forward`` uses, and remove the upstream. Nothing of the scenario is
mocked: the only stand-in is the member's own client behind Gatehouse, which accepts what it is
asked (an elicitation, with what the form offers) and wants no progress.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_REQUEST,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    LoggingMessageNotificationParams,
)

from accounts.models import Role
from accounts.services import membership_ensure, tenant_ensure, user_ensure
from core.errors import GatehouseError
from core.identity import Identity
from mcp_gateway.kernel.federation import FederatedItem
from upstreams.downstream import ForwardedCall
from upstreams.federation import PASSED_THROUGH, UpstreamFederation
from upstreams.models import AuthKind, Transport, Upstream, default_scopes
from upstreams.selectors import upstream_configs_async
from upstreams.services import UpstreamTestResult, upstream_remove, upstream_save
from upstreams.sign_in.headless import headless_authorize
from upstreams.sign_in.provider import Interactive, upstream_interactive_set

TENANT_SLUG = "conformance"
TENANT_NAME = "Conformance"
MEMBER = "conformance-client"
NO_SAMPLING = "The conformance client behind Gatehouse does not offer sampling."
AUTH_PREFIX = "auth/"
# The extension's scenario for OAuth client credentials (a client secret); the others of the
# extension (a signed JWT, enterprise-managed, DPoP, workload identity) are not implemented.
CLIENT_CREDENTIALS_SCENARIOS = frozenset({"auth/client-credentials-basic"})
# The client id as a URL (CIMD) that auth/basic-cimd expects; the scenario's authorization server
# never fetches it. A deployment's own is upstreams.sign_in.provider.sign_in_client_metadata_url.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
# json-schema-2020-12-preservation: the echo tool is given the other tool's input schema as
# Gatehouse publishes it, so the scenario sees what the catalog kept of it.
SCHEMA_ECHO_TOOL = "json_schema_echo"
SCHEMA_ECHOED_TOOL = "json_schema_2020_12_tool"
# What the tools are given when the scenario names no arguments: one plain value per JSON type.
EXAMPLE_VALUES: dict[str, Any] = {
    "string": "test",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "object": {},
    "array": [],
    "null": None,
}


@dataclass
class ConformanceRun:
    """What the run did, one line per step, and whether any step failed."""

    lines: list[str] = field(default_factory=list)
    failed: bool = False

    def note(self, line: str, *, failure: bool = False) -> None:
        self.lines.append(("FAILED: " if failure else "") + line)
        self.failed = self.failed or failure


def conformance_context(raw: str) -> dict[str, Any]:
    """``MCP_CONFORMANCE_CONTEXT``: a JSON object, or nothing."""
    if not raw.strip():
        return {}
    loaded = json.loads(raw)
    return loaded if isinstance(loaded, dict) else {}


def conformance_client_run(*, url: str, scenario: str, context: Mapping[str, Any]) -> ConformanceRun:
    """Register an upstream for ``url`` in the conformance tenant, exercise it as a member's calls
    would, and remove it (always)."""
    run = ConformanceRun()
    run.note(f"scenario {scenario or '(not named)'}: {url}")
    tenant = tenant_ensure(slug=TENANT_SLUG, name=TENANT_NAME)
    # Nobody signs in as this member: its password is never known.
    user = user_ensure(username=MEMBER, password=secrets.token_urlsafe(32))
    membership_ensure(user=user, tenant=tenant, role=Role.CONTRIBUTOR)
    upstream = Upstream(
        tenant=tenant,
        name=f"conformance-{uuid.uuid4().hex[:8]}",
        transport=Transport.HTTP,
        url=url,
        # Prefixed: a scenario's tool may share its name with one of Gatehouse's own.
        prefix_tools=True,
        scopes=default_scopes(),
        enabled=True,
    )
    secret = _credentials(upstream, scenario=scenario, context=context)
    try:
        try:
            result = _save(upstream, secret=secret)
        except GatehouseError as error:
            run.note(f"saving the upstream: {error}", failure=True)
            return run
        run.note(f"saved and tested: {result.summary if result else 'not tested'}")
        identity = Identity(
            user_id=user.pk,
            username=user.username,
            tenant_id=tenant.pk,
            tenant_slug=tenant.slug,
            tenant_name=tenant.name,
            role=Role.CONTRIBUTOR,
            scopes=frozenset(upstream.scopes),
            application_id=0,
            client_id=MEMBER,
            client_name=MEMBER,
            token_id=0,
        )
        asyncio.run(_exercise(run, identity=identity, upstream_id=upstream.pk, context=context))
    finally:
        if upstream.pk is not None:
            upstream_interactive_set(upstream_id=upstream.pk, interactive=None)
            upstream_remove(upstream=upstream)
    return run


def _credentials(upstream: Upstream, *, scenario: str, context: Mapping[str, Any]) -> str | None:
    """Set the upstream's authentication for the scenario; the client secret, if any. The
    client-credentials scenarios get that grant with the context's client; every other ``auth/``
    scenario an OAuth sign-in (authorization code), with the context's client as pre-registered
    when it names one."""
    client_id, secret = str(context.get("client_id") or ""), str(context.get("client_secret") or "")
    auth_scenario = scenario.startswith(AUTH_PREFIX)
    if scenario in CLIENT_CREDENTIALS_SCENARIOS or (not auth_scenario and client_id and secret):
        upstream.auth = AuthKind.OAUTH
        upstream.oauth_client_id = client_id
        upstream.oauth_scope = str(context.get("scope") or "")
        return secret
    if auth_scenario:
        upstream.auth = AuthKind.OAUTH_CODE
        upstream.oauth_client_id = client_id
        return secret or None
    return None


def _save(upstream: Upstream, *, secret: str | None) -> UpstreamTestResult | None:
    """Save (and so test) the upstream. An OAuth sign-in needs the upstream's id first: it is saved
    disabled, given the headless browser (which its pooled sessions keep, for a step-up), then
    enabled, when its connection test signs in."""
    if upstream.auth != AuthKind.OAUTH_CODE:
        return upstream_save(upstream=upstream, allow_stdio=False, oauth_client_secret=secret)
    upstream.enabled = False
    upstream_save(upstream=upstream, allow_stdio=False, oauth_client_secret=secret)
    upstream_interactive_set(
        upstream_id=upstream.pk,
        interactive=Interactive(authorize=headless_authorize, client_metadata_url=CIMD_URL),
    )
    upstream.enabled = True
    return upstream_save(upstream=upstream, allow_stdio=False)


class _Member(ForwardedCall):
    """The member's own MCP client behind Gatehouse, in place of a request's context: it accepts
    an elicitation as the form offers it (a person who changes nothing), wants no progress and
    offers no sampling."""

    def __init__(self) -> None:
        super().__init__(cast(ServerRequestContext[Any, Any], None), progress_token=None)

    def log(self, params: LoggingMessageNotificationParams) -> None:
        return None

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        return ElicitResult(action="accept", content={})

    async def sample(self, params: CreateMessageRequestParams) -> CreateMessageResult | ErrorData:
        return ErrorData(code=INVALID_REQUEST, message=NO_SAMPLING)


async def _exercise(
    run: ConformanceRun, *, identity: Identity, upstream_id: int, context: Mapping[str, Any]
) -> None:
    federation = UpstreamFederation()
    # The tenant's configurations as the federation reads them, and this upstream's lists from the
    # federation's catalog, as a member's tools/list gets them. Only this upstream's: the suite
    # may run several scenarios at once, each with an upstream of its own in the tenant.
    configs = await upstream_configs_async(tenant_id=identity.tenant_id)
    config = next((c for c in configs if c.id == upstream_id), None)
    if config is None:
        run.note("the saved upstream is not among the tenant's enabled ones", failure=True)
        return
    published = await federation._state().catalog.published(config)
    if published.error is not None:
        run.note(f"listing: {published.error}", failure=True)
        return
    tools = list(published.items.get("tool", {}).values())
    resources = list(published.items.get("resource", {}).values())
    prompts = list(published.items.get("prompt", {}).values())
    run.note(f"listed {len(tools)} tools, {len(resources)} resources, {len(prompts)} prompts")
    # By the upstream's own names, which the scenario knows.
    by_name = {str(item.origin[1]): item for item in tools}
    for name, arguments in _tool_calls(context, by_name):
        item = by_name.get(name)
        if item is None:
            run.note(f"tool {name!r}: not published by Gatehouse")
            continue
        await _send(run, federation, identity, item, {"name": item.name, "arguments": arguments})
    for item in resources:
        await _send(run, federation, identity, item, {"uri": item.name})


def _tool_calls(
    context: Mapping[str, Any], tools: Mapping[str, FederatedItem]
) -> list[tuple[str, dict[str, Any]]]:
    """The calls the scenario asks for (its context's ``toolCalls``), else one call of every tool
    with example arguments from its input schema (upstream names)."""
    asked = context.get("toolCalls")
    if isinstance(asked, list):
        return [
            (str(call.get("name", "")), dict(call.get("arguments") or {}))
            for call in asked
            if isinstance(call, dict)
        ]
    calls = []
    for name, item in tools.items():
        arguments = _example_arguments(item.payload.get("inputSchema"))
        echoed = tools.get(SCHEMA_ECHOED_TOOL)
        if name == SCHEMA_ECHO_TOOL and echoed is not None:
            arguments = {"schema": echoed.payload.get("inputSchema")}
        calls.append((name, arguments))
    return calls


def _example_arguments(schema: object) -> dict[str, Any]:
    """A value for each required property: its default, its first enum member, or an example of
    its type."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return {}
    listed = schema.get("required")
    required = listed if isinstance(listed, list) else []
    arguments: dict[str, Any] = {}
    for name, prop in schema["properties"].items():
        if name not in required or not isinstance(prop, dict):
            continue
        if "default" in prop:
            arguments[name] = prop["default"]
        elif isinstance(prop.get("enum"), list) and prop["enum"]:
            arguments[name] = prop["enum"][0]
        else:
            kind = prop.get("type")
            arguments[name] = EXAMPLE_VALUES.get(kind if isinstance(kind, str) else "string", "test")
    return arguments


async def _send(
    run: ConformanceRun,
    federation: UpstreamFederation,
    identity: Identity,
    item: FederatedItem,
    params: dict[str, Any],
) -> None:
    config, original = item.origin
    # The federation's own forwarding path (pool lease, retry on a forgotten session), without the
    # MCP request it would otherwise answer.
    try:
        async with asyncio.timeout(config.call_timeout):
            result = await federation._send(config, identity, item.kind, original, params, _Member())
    except MCPError as error:
        # An error forward() passes on as the upstream's own answer (no such method, invalid
        # arguments, not found): Gatehouse worked. Any other is the upstream failing.
        passed_on = error.error.code in PASSED_THROUGH
        run.note(
            f"{item.kind} {item.name!r}: the upstream answered error {error.error.code}: {error}",
            failure=not passed_on,
        )
        return
    except (GatehouseError, TimeoutError) as error:
        run.note(f"{item.kind} {item.name!r}: {error}", failure=True)
        return
    failed = bool(result.get("isError"))
    run.note(f"{item.kind} {item.name!r}: {'error result' if failed else 'ok'}")
