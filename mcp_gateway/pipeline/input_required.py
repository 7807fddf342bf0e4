"""Asking the client for input between two calls: protocol 2026-07-28's multi-round-trip requests
(SEP-2322), for tools, prompts and resource templates alike.

From 2026-07-28 on there is no back-channel: a handler that needs the person (a form), the client's
model (sampling) or the client's roots returns an ``InputRequiredResult`` naming what it needs, and
the client calls again with the answers in ``inputResponses`` and, verbatim, the ``requestState``
the handler minted. ``inputs_or_ask`` is that exchange in one call: the answers, or the result that
asks for them.

What the client sends back is the client's: answers are typed by the SDK (an answer that is no
``ElicitResult``, ``CreateMessageResult`` or ``ListRootsResult`` is refused with the request),
an answer of the wrong kind or a form that does not fit its schema counts as missing and is asked
again (SEP-2322: re-request rather than fail), and keys nobody asked for are ignored. The state is
the handler's own JSON object; the SDK's boundary seals it (``mcp_gateway.kernel.request_state``:
encrypted, bound to the person, tenant and OAuth client, to the tool or prompt and its arguments,
and expiring), so ``input_state`` only ever returns what this server minted for this caller, and a
state that fails any of that is refused before a handler runs (-32602).

Handshake-era clients (2025-11-25 and older) have a back-channel: there ``inputs_or_ask`` asks each
question mid-call over the session and returns the answers at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    FormElicitationCapability,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    RootsCapability,
    SamplingCapability,
    SamplingMessage,
    TextContent,
)

from core.errors import InvalidInput
from mcp_gateway.kernel.client_capabilities import capability_missing_error
from mcp_gateway.pipeline.client_requests import (
    NO_BACK_CHANNEL,
    client_asks_between_calls,
    client_offers_forms,
)

InputAnswer = ElicitResult | CreateMessageResult | CreateMessageResultWithTools | ListRootsResult

# The SDK's own words for a state that fails its checks, so every refusal reads the same.
INVALID_STATE = "Invalid or expired requestState"


def ask_form(*, message: str, schema: dict[str, Any]) -> ElicitRequest:
    """A form for the person (``elicitation/create``, form mode)."""
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def ask_model(*, prompt: str, max_tokens: int) -> CreateMessageRequest:
    """A completion by the client's model (``sampling/createMessage``)."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def ask_roots() -> ListRootsRequest:
    """The client's roots (``roots/list``)."""
    return ListRootsRequest()


def client_can_answer(ctx: Context, request: InputRequest) -> bool:
    """Whether the client declared the capability ``request`` needs (on 2026-07-28, in each
    request's ``_meta['io.modelcontextprotocol/clientCapabilities']``)."""
    if isinstance(request, ElicitRequest):
        return client_offers_forms(ctx)
    capabilities = ctx.client_capabilities
    if capabilities is None:
        return False
    if isinstance(request, CreateMessageRequest):
        return capabilities.sampling is not None
    return capabilities.roots is not None


def input_requests_offered(ctx: Context, requests: Mapping[str, InputRequest]) -> dict[str, InputRequest]:
    """The requests of ``requests`` the client can answer, for a handler that makes do without
    the others."""
    return {key: request for key, request in requests.items() if client_can_answer(ctx, request)}


def input_state(ctx: Context) -> dict[str, Any] | None:
    """The state this handler minted in the round the client answers, or None on a first round.

    The SDK unsealed it, so it is this server's JSON for this caller and these arguments; anything
    else is refused as the SDK refuses a tampered state."""
    if not ctx.request_state:
        return None
    try:
        state = json.loads(ctx.request_state)
    except ValueError:
        state = None
    if not isinstance(state, dict):
        raise InvalidInput(INVALID_STATE, data={"reason": "invalid_request_state"})
    return state


def input_answers(ctx: Context, requests: Mapping[str, InputRequest]) -> dict[str, InputAnswer]:
    """This call's answers to ``requests``: those of the kind each request expects, forms that fit
    their schema; nothing for keys outside ``requests``."""
    responses = ctx.input_responses or {}
    answers: dict[str, InputAnswer] = {}
    for key, request in requests.items():
        answer = responses.get(key)
        if answer is not None and _answers(request, answer):
            answers[key] = answer
    return answers


async def inputs_or_ask(
    ctx: Context, requests: Mapping[str, InputRequest], *, state: Mapping[str, Any] | None = None
) -> dict[str, InputAnswer] | InputRequiredResult:
    """The answers to every one of ``requests``, or the ``InputRequiredResult`` the handler returns
    to ask for them (with ``state``, which comes back through ``input_state``).

    A call that answers only some is asked everything again: the state never carries what the
    client sent, only what the handler minted. A request the client has not declared it can answer
    is refused with -32021 (``input_requests_offered`` first, to make do without it)."""
    if not client_asks_between_calls(ctx):
        _check_capabilities(ctx, requests)
        return {key: await _ask_now(ctx, request) for key, request in requests.items()}
    answers = input_answers(ctx, requests)
    if len(answers) == len(requests):
        return answers
    return input_required(ctx, requests, state=state)


def input_required(
    ctx: Context, requests: Mapping[str, InputRequest], *, state: Mapping[str, Any] | None = None
) -> InputRequiredResult:
    """The result that asks the client for ``requests``, carrying ``state`` to the next round;
    -32021 if the client has not declared it can answer one of them."""
    _check_capabilities(ctx, requests)
    return InputRequiredResult(
        input_requests=dict(requests),
        request_state=json.dumps(dict(state), separators=(",", ":")) if state is not None else None,
    )


def _check_capabilities(ctx: Context, requests: Mapping[str, InputRequest]) -> None:
    for request in requests.values():
        if not client_can_answer(ctx, request):
            raise _missing_capability(request)


def _answers(request: InputRequest, answer: InputAnswer) -> bool:
    if isinstance(request, ElicitRequest):
        return isinstance(answer, ElicitResult) and _fits_form(request, answer)
    if isinstance(request, CreateMessageRequest):
        return isinstance(answer, CreateMessageResult | CreateMessageResultWithTools)
    return isinstance(answer, ListRootsResult)


def _fits_form(request: ElicitRequest, answer: ElicitResult) -> bool:
    """A declined or cancelled form is an answer; an accepted one must fit the schema asked."""
    if answer.action != "accept":
        return True
    params = request.params
    schema = params.requested_schema if isinstance(params, ElicitRequestFormParams) else None
    if schema is None:
        return True
    try:
        return Draft202012Validator(schema).is_valid(answer.content or {})
    except SchemaError:
        return False


async def _ask_now(ctx: Context, request: InputRequest) -> InputAnswer:
    """One question over a handshake-era session's back-channel, answered before the call ends."""
    result_type: type[InputAnswer]
    if isinstance(request, ElicitRequest):
        result_type = ElicitResult
    elif isinstance(request, CreateMessageRequest):
        result_type = CreateMessageResult
    else:
        result_type = ListRootsResult
    metadata = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)
    try:
        return await ctx.request_context.session.send_request(request, result_type, metadata=metadata)
    except NoBackChannelError:
        raise ToolError(NO_BACK_CHANNEL) from None


def _missing_capability(request: InputRequest) -> MCPError:
    if isinstance(request, ElicitRequest):
        name = "form elicitation"
        required = ClientCapabilities(elicitation=ElicitationCapability(form=FormElicitationCapability()))
    elif isinstance(request, CreateMessageRequest):
        name = "sampling"
        required = ClientCapabilities(sampling=SamplingCapability())
    else:
        name = "roots"
        required = ClientCapabilities(roots=RootsCapability())
    return capability_missing_error(required=required, name=name)
