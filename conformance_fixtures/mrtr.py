"""Fixtures of the conformance suite's ``input-required-result-*`` scenarios (SEP-2322, protocol
2026-07-28's multi-round-trip requests), part of the ``conformance`` toolset
(``conformance_fixtures.toolset``).

Each asks through ``mcp_gateway.pipeline.input_required``, the path real tools take (``ask_question``): the
SDK's ``InputRequiredResult``, answers read from ``inputResponses`` and checked against what was
asked, state sealed by the SDK under Gatehouse's key and bound to the caller. Nothing here checks
the state's integrity itself: a tampered or foreign state never reaches these handlers. Texts and
keys follow the scenarios' descriptions.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import (
    ContentBlock,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    ListRootsResult,
    TextContent,
)

from accounts.scopes import SCOPE_READ
from mcp_gateway.kernel.registry import ToolSpec, tool
from mcp_gateway.pipeline.guard import guarded_resource
from mcp_gateway.pipeline.input_required import (
    InputAnswer,
    ask_form,
    ask_model,
    ask_roots,
    input_requests_offered,
    input_required,
    input_state,
    inputs_or_ask,
)

PROMPT_NAME = "test_input_required_result_prompt"
NO_CAPABILITY = "This client offers none of elicitation, sampling and roots, so nothing can be asked."


def _fixture(name: str, description: str) -> Any:
    return tool(name=name, description=description, scopes=[SCOPE_READ], structured=False)


def _form(message: str, field: str, kind: str) -> InputRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return ask_form(message=message, schema=schema)


def _text(text: str) -> list[ContentBlock]:
    return [TextContent(type="text", text=text)]


def _said(answer: InputAnswer, field: str) -> Any:
    """The accepted form's ``field``; None when the person declined or cancelled."""
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        return answer.content.get(field)
    return None


def _sampled(answer: InputAnswer) -> str:
    if not isinstance(answer, CreateMessageResult | CreateMessageResultWithTools):
        return ""
    content = answer.content
    blocks = content if isinstance(content, list) else [content]
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


def _roots(answer: InputAnswer) -> str:
    if not isinstance(answer, ListRootsResult) or not answer.roots:
        return "none"
    return ", ".join(f"{root.uri} ({root.name})" if root.name else str(root.uri) for root in answer.roots)


def _describe(answer: InputAnswer) -> str:
    if isinstance(answer, ElicitResult):
        return f"form {answer.action}" + (f" {answer.content}" if answer.content else "")
    if isinstance(answer, ListRootsResult):
        return f"roots {_roots(answer)}"
    return f"model said {_sampled(answer)!r}"


NAME_FORM = _form("What is your name?", "name", "string")


@_fixture("test_input_required_result_elicitation", "Asks the person's name, then greets them.")
async def test_input_required_result_elicitation(ctx: Context) -> list[ContentBlock] | InputRequiredResult:
    answers = await inputs_or_ask(ctx, {"user_name": NAME_FORM})
    if isinstance(answers, InputRequiredResult):
        return answers
    name = _said(answers["user_name"], "name")
    return _text(f"Hello, {name}!" if name else "No name was given.")


@_fixture("test_input_required_result_sampling", "Asks the client's model a question.")
async def test_input_required_result_sampling(ctx: Context) -> list[ContentBlock] | InputRequiredResult:
    question = ask_model(prompt="What is the capital of France?", max_tokens=100)
    answers = await inputs_or_ask(ctx, {"capital_question": question})
    if isinstance(answers, InputRequiredResult):
        return answers
    return _text(f"Sampling response: {_sampled(answers['capital_question'])}")


@_fixture("test_input_required_result_list_roots", "Asks the client for its roots.")
async def test_input_required_result_list_roots(ctx: Context) -> list[ContentBlock] | InputRequiredResult:
    answers = await inputs_or_ask(ctx, {"client_roots": ask_roots()})
    if isinstance(answers, InputRequiredResult):
        return answers
    return _text(f"Client roots: {_roots(answers['client_roots'])}")


CONFIRM_FORM = _form("Please confirm", "ok", "boolean")


@_fixture("test_input_required_result_request_state", "Asks for a confirmation, with state to echo.")
async def test_input_required_result_request_state(
    ctx: Context,
) -> list[ContentBlock] | InputRequiredResult:
    return await _confirmed(ctx, fixture="request_state", done="state-ok: confirmed={ok}")


@_fixture("test_input_required_result_tampered_state", "Asks for a confirmation; refuses a tampered state.")
async def test_input_required_result_tampered_state(
    ctx: Context,
) -> list[ContentBlock] | InputRequiredResult:
    return await _confirmed(ctx, fixture="tampered_state", done="State verified: confirmed={ok}")


async def _confirmed(ctx: Context, *, fixture: str, done: str) -> list[ContentBlock] | InputRequiredResult:
    """Complete only with the answer *and* the state minted for it: answers without it are asked
    again."""
    minted = {"fixture": fixture}
    if input_state(ctx) != minted:
        return input_required(ctx, {"confirm": CONFIRM_FORM}, state=minted)
    answers = await inputs_or_ask(ctx, {"confirm": CONFIRM_FORM}, state=minted)
    if isinstance(answers, InputRequiredResult):
        return answers
    return _text(done.format(ok=_said(answers["confirm"], "ok")))


def _three() -> dict[str, InputRequest]:
    return {
        "user_name": NAME_FORM,
        "greeting": ask_model(prompt="Generate a greeting", max_tokens=50),
        "client_roots": ask_roots(),
    }


@_fixture(
    "test_input_required_result_multiple_inputs", "Asks for a form, a completion and the roots at once."
)
async def test_input_required_result_multiple_inputs(
    ctx: Context,
) -> list[ContentBlock] | InputRequiredResult:
    answers = await inputs_or_ask(ctx, _three(), state={"fixture": "multiple_inputs"})
    if isinstance(answers, InputRequiredResult):
        return answers
    name = _said(answers["user_name"], "name")
    return _text(
        f"Name: {name}; greeting: {_sampled(answers['greeting'])}; roots: {_roots(answers['client_roots'])}"
    )


COLOUR_FORM = _form("Step 2: What is your favorite color?", "color", "string")


@_fixture("test_input_required_result_multi_round", "Asks two questions, one round after the other.")
async def test_input_required_result_multi_round(ctx: Context) -> list[ContentBlock] | InputRequiredResult:
    state = input_state(ctx) or {}
    if state.get("round") == 2:
        # The first answer rides the state this server sealed, not the client's word.
        answers = await inputs_or_ask(ctx, {"step2": COLOUR_FORM}, state=state)
        if isinstance(answers, InputRequiredResult):
            return answers
        return _text(f"{state.get('name')}'s favorite color is {_said(answers['step2'], 'color')}.")
    first = _form("Step 1: What is your name?", "name", "string")
    answers = await inputs_or_ask(ctx, {"step1": first}, state={"round": 1})
    if isinstance(answers, InputRequiredResult):
        return answers
    return input_required(
        ctx, {"step2": COLOUR_FORM}, state={"round": 2, "name": _said(answers["step1"], "name")}
    )


@_fixture("test_input_required_result_capabilities", "Asks only for what the client declared it can answer.")
async def test_input_required_result_capabilities(
    ctx: Context,
) -> list[ContentBlock] | InputRequiredResult:
    offered = input_requests_offered(ctx, _three())
    if not offered:
        raise ToolError(NO_CAPABILITY)
    answers = await inputs_or_ask(ctx, offered, state={"fixture": "capabilities", "asked": sorted(offered)})
    if isinstance(answers, InputRequiredResult):
        return answers
    return _text("; ".join(f"{key}: {_describe(answer)}" for key, answer in sorted(answers.items())))


TOOLS: tuple[ToolSpec, ...] = (
    test_input_required_result_elicitation,
    test_input_required_result_sampling,
    test_input_required_result_list_roots,
    test_input_required_result_request_state,
    test_input_required_result_tampered_state,
    test_input_required_result_multiple_inputs,
    test_input_required_result_multi_round,
    test_input_required_result_capabilities,
)
PROMPTS: tuple[str, ...] = (PROMPT_NAME,)


def install(server: MCPServer) -> None:
    """The prompt that asks before it answers: input-required results are not only for tools."""

    @server.prompt(name=PROMPT_NAME, description="A prompt that asks the person for its context first")
    @guarded_resource
    async def input_required_prompt(ctx: Context) -> list[Message] | InputRequiredResult:
        form = _form("What context should the prompt use?", "context", "string")
        answers = await inputs_or_ask(ctx, {"user_context": form})
        if isinstance(answers, InputRequiredResult):
            return answers
        return [UserMessage(f"Use this context: {_said(answers['user_context'], 'context')}")]
