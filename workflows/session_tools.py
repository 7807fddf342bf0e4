"""The workflow tools that bind a session and manage its conversations: ``initialize``,
``get_workflow_info``, ``get_commands``, ``new_conversation``, ``list_conversations``,
``activate_conversation`` and ``post_feedback``. Thin: the rules live in ``conversations.services``
and ``workflows.catalogue``."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from conversations.models import FEEDBACK_MAX_CHARS
from conversations.selectors import conversation_get, conversation_turn_digest, conversations_list
from conversations.services import (
    conversation_activate,
    conversation_initialize,
    conversation_rotate,
    turn_feedback,
)
from conversations.summaries import conversation_summary_write
from conversations.turn_lock import turn_lock_release, turn_lock_take
from core.db import db_call
from core.errors import GatehouseError, NotFound, PermissionDenied, RateLimited, Unavailable
from core.identity import Identity
from language_models.governed import Feature, ModelUse
from language_models.selectors import ModelConfig, NoModelConfigured, language_model_for_tenant
from mcp_gateway.kernel.registry import default_registry, tool
from mcp_gateway.kernel.tool_results import tool_result
from mcp_gateway.kernel.toolset_access import toolsets_enabled
from workflows.catalogue import CommandInfo, commands_visible, workflow_view
from workflows.scopes import SCOPE_WORKFLOWS_AGENT, SCOPE_WORKFLOWS_READ
from workflows.turns import LOCK_MARGIN_SECONDS, bound_caller, caller_of

OTHER_PERSON = (
    "An OAuth token speaks for one person: user_id must be your own ({user_id}, or your username), "
    "or left out."
)
# What clients written for the FastWorkflow contract send when their person gave none.
FASTWORKFLOW_DEFAULT_USER = "default_user"
USER_ID_MAX_CHARS = 150
CONVERSATION_UNKNOWN = "No such conversation of yours in this tenant."
DERIVED_NOTE = (
    "No language model wrote this: the topic and summary were derived from the conversation's turns"
    " ({reason})."
)
SUMMARY_FAILED = "The conversation was not rotated: its summary could not be written. {message}"
SUMMARY_TIMEOUT_SECONDS = 90.0


class WorkflowInfo(BaseModel):
    workflow_name: str
    description: str
    purpose: str
    available_contexts: list[str] = Field(description="The workflow's contexts, in order.")


class InitializeAnswer(BaseModel):
    workflow_info: WorkflowInfo
    conversation_id: str


class ParameterDoc(BaseModel):
    name: str
    type: str = Field(description="string, integer, number, boolean or date (YYYY-MM-DD).")
    required: bool
    description: str


class CommandDoc(BaseModel):
    name: str = Field(description="The qualified name, context/Name.")
    description: str
    parameters: list[ParameterDoc]
    examples: list[str]


class CommandsAnswer(BaseModel):
    display_text: str
    commands: list[CommandDoc]


class NewConversationAnswer(BaseModel):
    status: str
    new_conversation_id: str
    previous_conversation_id: str
    topic: str
    summary: str
    summary_source: str = Field(description="model, or derived when no language model wrote it.")
    note: str = ""


class ConversationDoc(BaseModel):
    conversation_id: str
    topic: str
    summary: str
    updated_at: str = Field(description="ISO 8601.")


class ConversationsAnswer(BaseModel):
    conversations: list[ConversationDoc]


class ActivatedAnswer(BaseModel):
    status: str
    conversation_id: str
    topic: str
    summary: str


class FeedbackAnswer(BaseModel):
    status: str
    conversation_id: str
    turn_id: int


def _answer(model: BaseModel, summary: str) -> CallToolResult:
    return tool_result(structured=model.model_dump(mode="json"), summary=[summary])


def _workflow_info(*, tenant_id: int) -> WorkflowInfo:
    view = workflow_view(tenant_id=tenant_id)
    return WorkflowInfo(
        workflow_name=view.name,
        description=view.description,
        purpose=view.purpose,
        available_contexts=[context.name for context in view.contexts],
    )


def _parse_conversation_id(value: str | None) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(CONVERSATION_UNKNOWN, data={"conversation_id": value[:64]}) from None


def _names_the_caller(user_id: int | str | None, *, identity: Identity) -> bool:
    """Whether ``user_id`` names the token's person: left out, their id (a number, or its ASCII
    digits), their username, or FastWorkflow's default user."""
    if user_id is None or user_id == FASTWORKFLOW_DEFAULT_USER:
        return True
    if isinstance(user_id, int):
        return user_id == identity.user_id
    if user_id.isascii() and user_id.isdigit():
        return int(user_id) == identity.user_id
    return user_id == identity.username


@tool(
    name="initialize",
    title="Start working with the workflow",
    description=(
        "Bind this MCP session to you and your active conversation with your tenant's workflow: the "
        "conversation named by conversation_id if it is yours, else your last one in this tenant, else "
        "a new one. Call it before every other workflow tool. Returns the workflow's description and "
        "the conversation id."
    ),
    scopes=[SCOPE_WORKFLOWS_READ],
)
async def initialize(
    ctx: Context,
    user_id: Annotated[
        int | Annotated[str, Field(max_length=USER_ID_MAX_CHARS)] | None,
        Field(
            description=(
                "Your own user id (a number, or your username; FastWorkflow clients' "
                f"{FASTWORKFLOW_DEFAULT_USER!r} means you too); defaults to the token's."
            )
        ),
    ] = None,
    conversation_id: Annotated[
        str | None, Field(max_length=64, description="A conversation of yours to continue.")
    ] = None,
) -> Annotated[CallToolResult, InitializeAnswer]:
    caller = caller_of(ctx)
    identity = caller.identity
    if not _names_the_caller(user_id, identity=identity):
        raise PermissionDenied(OTHER_PERSON.format(user_id=identity.user_id), data={"reason": "other_person"})
    try:
        wanted = _parse_conversation_id(conversation_id)
    except NotFound:
        # Not theirs, as a UUID that names nothing: their last conversation continues.
        wanted = None
    info = await db_call(_workflow_info, tenant_id=identity.tenant_id)
    binding = await db_call(
        conversation_initialize,
        key=caller.key,
        user_id=identity.user_id,
        tenant_id=identity.tenant_id,
        client_id=identity.client_id,
        conversation_id=wanted,
        first_context=info.available_contexts[0] if info.available_contexts else "",
        session_id=caller.session_id,
    )
    answer = InitializeAnswer(workflow_info=info, conversation_id=str(binding.conversation_id))
    return _answer(answer, f"Workflow {info.workflow_name!r}, conversation {answer.conversation_id}.")


@tool(
    name="get_workflow_info",
    title="Describe the workflow",
    description="The workflow's name, description, purpose and contexts.",
    scopes=[SCOPE_WORKFLOWS_READ],
)
async def get_workflow_info(ctx: Context) -> Annotated[CallToolResult, WorkflowInfo]:
    bound = await bound_caller(ctx)
    info = await db_call(_workflow_info, tenant_id=bound.caller.identity.tenant_id)
    return _answer(info, f"Workflow {info.workflow_name!r}: {', '.join(info.available_contexts)}.")


def _visible(*, tenant_id: int, context: str | None, granted: frozenset[str]) -> list[CommandInfo]:
    enabled = toolsets_enabled(tenant_id=tenant_id, registry=default_registry())
    return commands_visible(tenant_id=tenant_id, context=context, granted=granted, enabled_toolsets=enabled)


async def visible_commands(
    *, tenant_id: int, context: str | None, granted: frozenset[str]
) -> list[CommandInfo]:
    """The commands the caller may run (of ``context``, or of every context when None)."""
    return await db_call(_visible, tenant_id=tenant_id, context=context, granted=granted)


def commands_display_text(*, context: str, commands: list[CommandInfo]) -> str:
    lines = [f"Commands in context {context} (run one with execute_command):"]
    for command in commands:
        lines.append(f"- {command.qualified_name}: {command.description}")
        lines.extend(f"    e.g. {example}" for example in command.examples[:2])
    return "\n".join(lines)


@tool(
    name="get_commands",
    title="List the commands of the current context",
    description=(
        "The commands you may run in the session's current context, built-ins included, each with its "
        "parameters and examples in the command syntax context/Name <param>value</param>."
    ),
    scopes=[SCOPE_WORKFLOWS_READ],
)
async def get_commands(ctx: Context) -> Annotated[CallToolResult, CommandsAnswer]:
    bound = await bound_caller(ctx)
    identity = bound.caller.identity
    commands = await visible_commands(
        tenant_id=identity.tenant_id, context=bound.context, granted=identity.scopes
    )
    answer = CommandsAnswer(
        display_text=commands_display_text(context=bound.context, commands=commands),
        commands=[
            CommandDoc(
                name=command.qualified_name,
                description=command.description,
                parameters=[
                    ParameterDoc(name=p.name, type=p.type, required=p.required, description=p.description)
                    for p in command.parameters
                ],
                examples=list(command.examples),
            )
            for command in commands
        ],
    )
    return _answer(answer, f"{len(commands)} commands in context {bound.context}.")


async def _summary_model(*, tenant_id: int, scopes: frozenset[str]) -> tuple[ModelConfig | None, str]:
    """The tenant's model when the caller may use it, else None and why not."""
    if SCOPE_WORKFLOWS_AGENT not in scopes:
        return None, f"your token lacks {SCOPE_WORKFLOWS_AGENT}"
    try:
        return await db_call(language_model_for_tenant, tenant_id=tenant_id), ""
    except NoModelConfigured:
        return None, "no language model is configured for this tenant"


@tool(
    name="new_conversation",
    title="Start a new conversation",
    description=(
        "Close the active conversation with a topic and a summary (written by your tenant's language "
        "model, or derived from its turns when there is none) and move this session to a new one. If the "
        "summary cannot be written, nothing changes."
    ),
    scopes=[SCOPE_WORKFLOWS_READ],
    read_only=False,
    timeout_seconds=SUMMARY_TIMEOUT_SECONDS + 30,
)
async def new_conversation(ctx: Context) -> Annotated[CallToolResult, NewConversationAnswer]:
    bound = await bound_caller(ctx)
    identity, key = bound.caller.identity, bound.caller.key
    # No turn may land in the conversation while it is being closed.
    await db_call(turn_lock_take, key=key, seconds=SUMMARY_TIMEOUT_SECONDS + LOCK_MARGIN_SECONDS)
    try:
        config, reason = await _summary_model(tenant_id=identity.tenant_id, scopes=identity.scopes)
        turns = await db_call(conversation_turn_digest, conversation_id=bound.conversation_id)
        try:
            topic, summary, derived = await conversation_summary_write(
                use=ModelUse(identity=identity, feature=Feature.SUMMARY), config=config, turns=turns
            )
        except RateLimited:
            # A spent budget or the model-call limit: the same refusal as every feature's.
            raise
        except GatehouseError as error:
            raise Unavailable(
                SUMMARY_FAILED.format(message=error.message), data={"reason": "summary_failed"}
            ) from error
        new = await db_call(
            conversation_rotate,
            key=key,
            user_id=identity.user_id,
            tenant_id=identity.tenant_id,
            topic=topic,
            summary=summary,
            derived=derived,
        )
        # The topic as stored: made unique among the person's topics, it may carry a suffix.
        closed = await db_call(
            conversation_get,
            user_id=identity.user_id,
            tenant_id=identity.tenant_id,
            conversation_id=bound.conversation_id,
        )
    finally:
        await db_call(turn_lock_release, key=key)
    topic, summary = closed.topic, closed.summary
    answer = NewConversationAnswer(
        status="ok",
        new_conversation_id=str(new.pk),
        previous_conversation_id=str(bound.conversation_id),
        topic=topic,
        summary=summary,
        summary_source="derived" if derived else "model",
        note=DERIVED_NOTE.format(reason=reason or "the model was not used") if derived else "",
    )
    return _answer(answer, f"Closed {topic!r}; the session is now in conversation {new.pk}.")


def _conversation_doc(conversation: Any) -> ConversationDoc:
    return ConversationDoc(
        conversation_id=str(conversation.pk),
        topic=conversation.topic,
        summary=conversation.summary,
        updated_at=conversation.updated.isoformat(),
    )


@tool(
    name="list_conversations",
    title="List your conversations",
    description="Your conversations in this tenant, most recently active first.",
    scopes=[SCOPE_WORKFLOWS_READ],
)
async def list_conversations(
    ctx: Context, limit: Annotated[int, Field(ge=1, le=100)] = 10
) -> Annotated[CallToolResult, ConversationsAnswer]:
    bound = await bound_caller(ctx)
    identity = bound.caller.identity
    rows = await db_call(
        conversations_list, user_id=identity.user_id, tenant_id=identity.tenant_id, limit=limit
    )
    answer = ConversationsAnswer(conversations=[_conversation_doc(row) for row in rows])
    return _answer(answer, f"{len(rows)} conversation(s).")


@tool(
    name="activate_conversation",
    title="Continue another conversation",
    description="Move this session to another of your conversations in this tenant.",
    scopes=[SCOPE_WORKFLOWS_READ],
    read_only=False,
)
async def activate_conversation(
    ctx: Context, conversation_id: Annotated[str, Field(min_length=1, max_length=64)]
) -> Annotated[CallToolResult, ActivatedAnswer]:
    bound = await bound_caller(ctx)
    identity = bound.caller.identity
    wanted = _parse_conversation_id(conversation_id)
    assert wanted is not None
    conversation = await db_call(
        conversation_activate,
        key=bound.caller.key,
        user_id=identity.user_id,
        tenant_id=identity.tenant_id,
        conversation_id=wanted,
    )
    answer = ActivatedAnswer(
        status="ok",
        conversation_id=str(conversation.pk),
        topic=conversation.topic,
        summary=conversation.summary,
    )
    return _answer(answer, f"The session is now in conversation {conversation.pk}.")


@tool(
    name="post_feedback",
    title="Give feedback on the last answer",
    description=(
        "Attach feedback to the latest turn of the active conversation: a score (true/false or a number) "
        "and/or words. At least one is needed."
    ),
    scopes=[SCOPE_WORKFLOWS_READ],
    read_only=False,
)
async def post_feedback(
    ctx: Context,
    binary_or_numeric_score: Annotated[bool | float | None, Field(allow_inf_nan=False)] = None,
    nl_feedback: Annotated[str | None, Field(max_length=FEEDBACK_MAX_CHARS)] = None,
) -> Annotated[CallToolResult, FeedbackAnswer]:
    bound = await bound_caller(ctx)
    identity = bound.caller.identity
    turn = await db_call(
        turn_feedback,
        key=bound.caller.key,
        user_id=identity.user_id,
        tenant_id=identity.tenant_id,
        score=binary_or_numeric_score,
        text=nl_feedback,
    )
    answer = FeedbackAnswer(status="ok", conversation_id=str(turn.conversation_id), turn_id=turn.pk)
    return _answer(answer, f"Feedback stored on turn {turn.pk}.")
