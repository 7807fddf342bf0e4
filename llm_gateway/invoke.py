"""The one path of a gateway call, shared by the REST API (``POST /api/v1/llm/invoke``) and the
``llm_invoke`` MCP tool: the channels parse and authorize, then call ``llm_gateway_invoke``.

In order: the input is checked (message text a provider can encode, ``extra`` options, the response
schema, the provider, the header key) and refused with ``InvalidInput`` naming the field, leaving no
record, since nothing was attempted; the model and key are resolved (``NotReady`` when there is no
key, recorded as an error); then the governed path every model call takes
(``language_models.governed``: rate limit, budgets, the call with its errors translated, usage
record and audit row), inside which the answer is parsed and, when a schema was given, validated
(``StructuredOutputInvalid``, recorded with the tokens it cost). Every call past the checks leaves
exactly one usage record, whose id is the answer's ``id``.

Log events on ``gatehouse.llm_gateway``, one line each, with ``extra`` fields the JSON log keeps:
``structured_output_requested``, ``model_request_started``, ``model_response_received`` (tokens,
duration) and ``model_request_error`` (code). They name the provider, model, tenant and request id;
never a prompt, an answer or a key.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from core.db import db_call
from core.errors import GatehouseError, InvalidInput, RateLimited
from core.identity import Identity
from core.request_context import current_request_id, request_id_new
from core.text_safety import text_unstorable_reason
from language_models.governed import Feature, GovernedCall, ModelUse, model_call
from language_models.governed.usage import UsageStart, usage_not_run
from language_models.model_checks import litellm_import
from language_models.models import UsageOutcome
from language_models.selectors import ModelConfig
from llm_gateway.capabilities import model_json_mode, model_structured_output
from llm_gateway.metrics import metrics_gateway_call
from llm_gateway.options import extra_options_check
from llm_gateway.resolution import PROVIDER_UNKNOWN, gateway_model_resolve, header_key_check, provider_known
from llm_gateway.schemas import InvokeRequest, InvokeResponse, Usage
from llm_gateway.structured import response_schema_prepare, structured_output_parse, structured_request_build
from llm_gateway.tool_loop import ToolRun, tool_conversation, tools_bind
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.pipeline.tool_runs import tools_list_run

logger = logging.getLogger("gatehouse.llm_gateway")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

GATEWAY_PURPOSE = "gateway"
CHANNELS = ("api", "mcp")
MESSAGE_UNENCODABLE = "messages[{index}].content {reason}; a provider cannot be sent it."
MODEL_UNPRINTABLE = "model contains a control character or an unpaired surrogate."
SCHEMA_UNENCODABLE = "response_schema {reason}; a provider cannot be sent it."


async def llm_gateway_invoke(
    *,
    identity: Identity,
    request: InvokeRequest,
    header_key: str | None,
    channel: str,
    run_tool: ToolRun | None = None,
) -> InvokeResponse:
    """Call the model ``request`` names for ``identity``'s tenant, within its budgets; one usage record.

    ``header_key`` is ``X-Provider-Api-Key``, for this call only. ``channel`` is ``"api"`` or ``"mcp"``.
    Raises ``InvalidInput`` (with ``data["field"]``), ``BudgetExceeded``, ``NotReady`` (no key),
    ``StructuredOutputInvalid``, or the provider failures ``llm_complete`` translates.
    """
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {CHANNELS}, not {channel!r}")
    messages = _messages_checked(request)
    options = extra_options_check(extra=request.extra)
    schema = None
    if request.response_schema is not None:
        reason = text_unstorable_reason(request.response_schema)
        if reason is not None:
            raise InvalidInput(SCHEMA_UNENCODABLE.format(reason=reason), data={"field": "response_schema"})
        schema = response_schema_prepare(schema=request.response_schema)
    # litellm takes seconds to import the first time: in a thread, never on the event loop.
    await asyncio.to_thread(litellm_import)
    # Once litellm is loaded its provider table is a set lookup: no thread needed.
    _request_check(provider=request.provider, header_key=header_key)

    call = _Call(identity=identity, request=request, channel=channel)
    try:
        config = await db_call(
            gateway_model_resolve,
            tenant_id=identity.tenant_id,
            provider=request.provider,
            model=request.model,
            header_key=header_key,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
        )
    except InvalidInput:
        raise
    except GatehouseError as error:
        await call.unresolved(error, structured=schema is not None)
        raise
    call.resolved(config)

    structured_output = schema is not None and model_structured_output(
        provider=request.provider, model=config.model
    )
    built = structured_request_build(
        messages=messages,
        schema=schema,
        json_mode=options.json_mode,
        structured_output=structured_output,
        native_json_mode=model_json_mode(provider=request.provider, model=config.model),
    )
    if schema is not None or options.json_mode:
        call.log(
            logging.INFO,
            "structured_output_requested",
            schema=schema is not None,
            native=built.native,
            json_mode=built.response_format is not None and not built.native,
        )
    use = ModelUse(identity=identity, feature=_feature(channel), channel=channel)
    if request.mcp is not None:
        if run_tool is None:
            raise ValueError("a call with MCP tools needs its channel's run_tool")
        return await _with_tools(
            call=call, use=use, config=config, messages=built.messages, request=request, schema=schema,
            json_mode=options.json_mode, run_tool=run_tool,
        )  # fmt: skip
    governed: GovernedCall | None = None
    try:
        async with model_call(
            use=use,
            config=config,
            messages=built.messages,
            purpose=GATEWAY_PURPOSE,
            provider=request.provider,
            structured=schema is not None,
        ) as governed:
            call.log(logging.INFO, "model_request_started")
            completion = await governed.complete(
                response_format=built.response_format, options=options.options
            )
            if schema is None and not options.json_mode:
                output = structured_output_parse(text=completion.text, schema=None, json_mode=False)
            else:
                # Lenient parsing and schema validation are CPU work on up to a whole answer: off the loop.
                output = await asyncio.to_thread(
                    structured_output_parse, text=completion.text, schema=schema, json_mode=options.json_mode
                )
    except Exception as error:
        # The governed path recorded it (an answer that broke its schema with the tokens it cost).
        call.failed(error, governed=governed)
        raise
    call.succeeded(governed)
    assert governed.usage_id is not None
    return InvokeResponse(
        id=governed.usage_id.hex,
        output=output,
        usage=_usage(completion.prompt_tokens, completion.completion_tokens),
        provider=request.provider,
        model=call.model,
        cost=completion.cost,
    )


async def _toolsets_of(*, identity: Identity, wanted: bool) -> Callable[[str], frozenset[str]]:
    """Under which names a listed tool is bound with a whole toolset: a built-in tool under its
    toolset's; an upstream's tool under its federation's toolset and ``<toolset>.<upstream>``
    (``upstreams.demo``), so that one upstream can be bound without the others."""
    registry = default_registry()
    federated: dict[str, frozenset[str]] = {}
    if wanted:
        for toolset in registry.toolsets:
            if toolset.federation is None:
                continue
            for item in await toolset.federation.items(identity=identity, kind="tool"):
                # The first keeps a name, as in the lists (mcp_gateway.pipeline.federated_entries).
                federated.setdefault(item.name, frozenset({toolset.name, f"{toolset.name}.{item.source}"}))

    def of(name: str) -> frozenset[str]:
        own = registry.toolset_of_tool(name)
        return frozenset({own}) if own is not None else federated.get(name, frozenset())

    return of


async def _with_tools(
    *,
    call: _Call,
    use: ModelUse,
    config: ModelConfig,
    messages: list[dict[str, str]],
    request: InvokeRequest,
    schema: dict[str, Any] | None,
    json_mode: bool,
    run_tool: ToolRun,
) -> InvokeResponse:
    """The call with MCP tools bound (``llm_gateway.tool_loop``): one governed model call a round."""
    assert request.mcp is not None
    listed = await tools_list_run(identity=use.identity, request_id=call.request_id or request_id_new())
    toolsets_of = await _toolsets_of(identity=use.identity, wanted=bool(request.mcp.toolsets))
    bound = tools_bind(listed=listed, binding=request.mcp, toolsets_of=toolsets_of)
    try:
        loop = await tool_conversation(
            use=use, config=config, messages=list(messages), provider=request.provider,
            structured=schema is not None, bound=bound, run=run_tool, binding=request.mcp, log=call.log,
        )  # fmt: skip
        if loop.finish_reason == "answered" and (schema is not None or json_mode):
            output = await asyncio.to_thread(
                structured_output_parse, text=loop.text, schema=schema, json_mode=json_mode
            )
        else:
            output = structured_output_parse(text=loop.text, schema=None, json_mode=False)
    except Exception as error:
        call.failed(error, governed=None)
        raise
    assert loop.last is not None
    assert loop.last.usage_id is not None
    call.succeeded(loop.last)
    return InvokeResponse(
        id=loop.last.usage_id.hex,
        output=output,
        usage=_usage(loop.prompt_tokens, loop.completion_tokens),
        provider=request.provider,
        model=call.model,
        cost=loop.cost,
        tool_calls=loop.calls,
        finish_reason=loop.finish_reason,  # type: ignore[arg-type]
    )


def _feature(channel: str) -> Feature:
    """The REST API's calls are the ``api`` feature, the MCP tool's ``llm_invoke``."""
    return Feature.API if channel == "api" else Feature.LLM_INVOKE


def _usage(prompt_tokens: int, completion_tokens: int) -> Usage:
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )


def _request_check(*, provider: str, header_key: str | None) -> None:
    """The checks that need litellm's provider table: refused before the budget, with the field."""
    if not provider_known(provider=provider):
        raise InvalidInput(PROVIDER_UNKNOWN.format(provider=provider), data={"field": "provider"})
    header_key_check(header_key=header_key)


def _messages_checked(request: InvokeRequest) -> list[dict[str, str]]:
    # The model name is recorded and logged before it is resolved: nothing that could not be.
    if _CONTROL.search(request.model):
        raise InvalidInput(MODEL_UNPRINTABLE, data={"field": "model"})
    for index, message in enumerate(request.messages):
        reason = text_unstorable_reason(message.content)
        if reason is not None:
            raise InvalidInput(
                MESSAGE_UNENCODABLE.format(index=index, reason=reason),
                data={"field": f"messages[{index}].content"},
            )
    return [{"role": message.role, "content": message.content} for message in request.messages]


class _Call:
    """One call's log lines and Prometheus counts: what it was asked, what it resolved to, how it
    ended. Its usage record and audit row are the governed path's."""

    def __init__(self, *, identity: Identity, request: InvokeRequest, channel: str) -> None:
        self.identity = identity
        self.provider = request.provider
        self.model = request.model
        self.channel = channel
        self.request_id = current_request_id()

    def resolved(self, config: ModelConfig) -> None:
        self.model = config.model.removeprefix(f"{self.provider}/")

    def log(self, level: int, event: str, **fields: Any) -> None:
        logger.log(
            level,
            "%s %s/%s",
            event,
            self.provider,
            self.model,
            extra={
                "event": event,
                "provider": self.provider,
                "model": self.model,
                "tenant": self.identity.tenant_slug,
                "channel": self.channel,
                "request_id": self.request_id,
                **fields,
            },
        )

    async def unresolved(self, error: GatehouseError, *, structured: bool) -> None:
        """No model or key for the call: recorded as a failed call of the gateway's."""
        self.log(logging.WARNING, "model_request_error", code=error.api_code, duration_ms=0)
        self._count(outcome=UsageOutcome.ERROR, completion=None, duration_ms=0)
        try:
            await db_call(
                usage_not_run,
                outcome=UsageOutcome.ERROR,
                start=UsageStart(
                    identity=self.identity,
                    feature=_feature(self.channel),
                    channel=self.channel,
                    provider=self.provider,
                    model=self.model,
                    key_source="",
                    structured=structured,
                    request_id=self.request_id,
                ),
                error_code=error.api_code,
            )
        except Exception:
            # The caller is owed the call's own error, not the record's (a database outage, say).
            logger.exception(
                "Usage record of a failed gateway call could not be written",
                extra={"event": "usage_record_failed", "tenant": self.identity.tenant_slug},
            )

    def failed(self, error: Exception, *, governed: GovernedCall | None) -> None:
        code = error.api_code if isinstance(error, GatehouseError) else "internal_error"
        # Refused before the call began (the model-call limit, a spent budget), not failed.
        refused = isinstance(error, RateLimited) and governed is None
        duration_ms = 0 if governed is None else governed.duration_ms
        self.log(
            logging.INFO if refused else logging.WARNING,
            "model_request_error",
            code=code,
            duration_ms=duration_ms,
        )
        self._count(
            outcome=UsageOutcome.REFUSED if refused else UsageOutcome.ERROR,
            completion=governed,
            duration_ms=duration_ms,
        )

    def succeeded(self, governed: GovernedCall) -> None:
        self.log(
            logging.INFO,
            "model_response_received",
            prompt_tokens=governed.prompt_tokens,
            completion_tokens=governed.completion_tokens,
            total_tokens=governed.prompt_tokens + governed.completion_tokens,
            cost=governed.cost,
            duration_ms=governed.duration_ms,
        )
        self._count(outcome=UsageOutcome.OK, completion=governed, duration_ms=governed.duration_ms)

    def _count(self, *, outcome: str, completion: GovernedCall | None, duration_ms: int) -> None:
        metrics_gateway_call(
            tenant=self.identity.tenant_slug,
            provider=self.provider,
            channel=self.channel,
            outcome=outcome,
            prompt_tokens=completion.prompt_tokens if completion else 0,
            completion_tokens=completion.completion_tokens if completion else 0,
            cost=completion.cost if completion else None,
            duration_seconds=duration_ms / 1000,
        )
