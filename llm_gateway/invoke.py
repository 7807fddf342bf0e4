"""The one path of a gateway call, shared by the REST API (``POST /api/v1/llm/invoke``) and the
``llm_invoke`` MCP tool: the channels parse and authorize, then call ``llm_gateway_invoke``.

In order: the input is checked (message text a provider can encode, ``extra`` options, the response
schema, the provider, the header key) and refused with ``InvalidInput`` naming the field, leaving no
record, since nothing was attempted; the budgets are checked (``BudgetExceeded``, recorded as
refused); the model and key are resolved (``NotReady`` when there is no key, recorded as an error);
the call goes through ``llm_complete`` (litellm, with its errors translated there, in the one place);
the answer is parsed and, when a schema was given, validated (``StructuredOutputInvalid``). Every
call past the checks leaves exactly one usage record, whose id is the answer's ``id``.

Log events on ``gatehouse.llm_gateway``, one line each, with ``extra`` fields the JSON log keeps:
``structured_output_requested``, ``model_request_started``, ``model_response_received`` (tokens,
duration) and ``model_request_error`` (code). They name the provider, model, tenant and request id;
never a prompt, an answer or a key.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

from core.db import db_call
from core.errors import BudgetExceeded, GatehouseError, InvalidInput
from core.identity import Identity
from core.request_context import current_request_id
from core.text_safety import text_unstorable_reason
from language_models.completion import Completion, llm_complete
from language_models.model_checks import litellm_import
from language_models.selectors import ModelConfig
from llm_gateway.budgets import budget_check
from llm_gateway.capabilities import model_json_mode, model_structured_output
from llm_gateway.models import UsageOutcome
from llm_gateway.options import extra_options_check
from llm_gateway.resolution import PROVIDER_UNKNOWN, gateway_model_resolve, header_key_check, provider_known
from llm_gateway.schemas import InvokeRequest, InvokeResponse, Usage
from llm_gateway.structured import response_schema_prepare, structured_output_parse, structured_request_build
from llm_gateway.usage import usage_record

logger = logging.getLogger("gatehouse.llm_gateway")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

GATEWAY_PURPOSE = "gateway"
CHANNELS = ("api", "mcp")
MESSAGE_UNENCODABLE = "messages[{index}].content {reason}; a provider cannot be sent it."
MODEL_UNPRINTABLE = "model contains a control character or an unpaired surrogate."
SCHEMA_UNENCODABLE = "response_schema {reason}; a provider cannot be sent it."


async def llm_gateway_invoke(
    *, identity: Identity, request: InvokeRequest, header_key: str | None, channel: str
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

    call = _Call(identity=identity, request=request, channel=channel, structured=schema is not None)
    try:
        config = await db_call(
            _budget_checked_model, identity=identity, request=request, header_key=header_key
        )
    except InvalidInput:
        raise
    except GatehouseError as error:
        await call.failed(error)
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
    call.log(logging.INFO, "model_request_started")
    completion: Completion | None = None
    try:
        completion = await llm_complete(
            config=config,
            messages=built.messages,
            purpose=GATEWAY_PURPOSE,
            response_format=built.response_format,
            options=options.options,
        )
        if schema is None and not options.json_mode:
            output = structured_output_parse(text=completion.text, schema=None, json_mode=False)
        else:
            # Lenient parsing and schema validation are CPU work on up to a whole answer: off the loop.
            output = await asyncio.to_thread(
                structured_output_parse, text=completion.text, schema=schema, json_mode=options.json_mode
            )
    except Exception as error:
        # Ours (a provider failure, a broken schema) or not (a bug): either way the call is recorded.
        await call.failed(error, completion=completion)
        raise
    usage_id = await call.succeeded(completion)
    return InvokeResponse(
        id=usage_id,
        output=output,
        usage=Usage(
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            total_tokens=completion.prompt_tokens + completion.completion_tokens,
        ),
        provider=request.provider,
        model=call.model,
        cost=completion.cost,
    )


def _budget_checked_model(
    *, identity: Identity, request: InvokeRequest, header_key: str | None
) -> ModelConfig:
    """The budgets checked, then the model and key resolved: one hop to the database thread."""
    budget_check(tenant_id=identity.tenant_id, user_id=identity.user_id)
    return gateway_model_resolve(
        tenant_id=identity.tenant_id,
        provider=request.provider,
        model=request.model,
        header_key=header_key,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
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
    """One call's record and log lines: what it was asked, what it resolved to, how it ended."""

    def __init__(self, *, identity: Identity, request: InvokeRequest, channel: str, structured: bool) -> None:
        self.identity = identity
        self.provider = request.provider
        self.model = request.model
        self.channel = channel
        self.structured = structured
        self.key_source = ""
        self.request_id = current_request_id()
        self.started = time.monotonic()

    def resolved(self, config: ModelConfig) -> None:
        self.model = config.model.removeprefix(f"{self.provider}/")
        self.key_source = config.key_source
        # The call itself is timed from here: budget and key lookups are the gateway's, not the model's.
        self.started = time.monotonic()

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

    def _duration_ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)

    async def failed(self, error: Exception, *, completion: Completion | None = None) -> None:
        code = error.api_code if isinstance(error, GatehouseError) else "internal_error"
        refused = isinstance(error, BudgetExceeded)
        duration_ms = 0 if refused else self._duration_ms()
        self.log(
            logging.INFO if refused else logging.WARNING,
            "model_request_error",
            code=code,
            duration_ms=duration_ms,
        )
        try:
            await self._failure_record(
                error_code=code, refused=refused, completion=completion, duration_ms=duration_ms
            )
        except Exception:
            # The caller is owed the call's own error, not the record's (a database outage, say).
            logger.exception(
                "Usage record of a failed gateway call could not be written",
                extra={"event": "usage_record_failed", "tenant": self.identity.tenant_slug},
            )

    async def _failure_record(
        self, *, error_code: str, refused: bool, completion: Completion | None, duration_ms: int
    ) -> None:
        await db_call(
            usage_record,
            identity=self.identity,
            channel=self.channel,
            provider=self.provider,
            model=self.model,
            key_source=self.key_source,
            outcome=UsageOutcome.REFUSED if refused else UsageOutcome.ERROR,
            error_code=error_code,
            # An answer that broke its schema was still paid for.
            prompt_tokens=completion.prompt_tokens if completion else 0,
            completion_tokens=completion.completion_tokens if completion else 0,
            cost=completion.cost if completion else None,
            duration_ms=duration_ms,
            structured=self.structured,
            request_id=self.request_id,
        )

    async def succeeded(self, completion: Completion) -> str:
        duration_ms = self._duration_ms()
        self.log(
            logging.INFO,
            "model_response_received",
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            total_tokens=completion.prompt_tokens + completion.completion_tokens,
            cost=completion.cost,
            duration_ms=duration_ms,
        )
        usage = await db_call(
            usage_record,
            identity=self.identity,
            channel=self.channel,
            provider=self.provider,
            model=self.model,
            key_source=self.key_source,
            outcome=UsageOutcome.OK,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost=completion.cost,
            duration_ms=duration_ms,
            structured=self.structured,
            request_id=self.request_id,
        )
        return usage.id.hex
