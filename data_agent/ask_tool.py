"""``ask_question``: a plain-language question about a tenant's data, answered by the pipeline in
``ask_pipeline`` with a narrative, chart specifications, the data's lineage and caveats.

Thin on purpose: validation is the input schema's, the work is the pipeline's; this module reaches
the person (progress, elicitation) and lays the outcome out as content and structured content.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult
from pydantic import BaseModel, Field, StringConstraints

from core.conf import gatehouse_settings
from core.db import db_call
from core.errors import Timeout
from data_agent.arguments import OntologyId
from data_agent.ask_pipeline import Outcome, QuestionRun, question_context_load
from data_agent.ask_schemas import ClarifyingQuestion
from data_agent.executor import Cell
from data_agent.scopes import SCOPE_DATA_AGENT_WRITE, SCOPE_ONTOLOGIES_READ
from language_models.governed import Feature, ModelUse
from mcp_gateway.kernel.identity import identity_from_context
from mcp_gateway.kernel.registry import tool
from mcp_gateway.kernel.tool_results import tool_result
from mcp_gateway.pipeline.audit_trail import audit_note
from mcp_gateway.pipeline.client_requests import (
    client_asks_between_calls,
    client_elicit_optional,
    client_offers_forms,
)
from mcp_gateway.pipeline.input_required import ask_form, input_required, input_state

QUESTION_MAX_CHARS = 2000
# Rows in the narrative's table and in structured content; the rest are counted, not sent.
ROWS_IN_NARRATIVE = 20
ROWS_IN_RESULT = 100
CAVEAT_SIGN = "⚠️"
CLARIFY_MESSAGE = "To answer this question, the data agent needs to know:"
CLARIFY_INPUT = "clarify"


def question_timeout_seconds() -> int:
    """The whole of one run, clarification included; read per call, so an override applies."""
    return gatehouse_settings.DATA_AGENT_QUESTION_TIMEOUT_SECONDS


class AskAnswer(BaseModel):
    status: Literal["answered", "clarification_needed", "cannot_answer"]
    question: str
    narrative: str = Field(description="The answer in markdown, with a table of the first rows.")
    chartSpecs: dict[str, Any] | None = Field(
        description='{"_type": "chart_specs", "charts": [...]}: bar and line charts carry categories '
        "and series, pie charts slices, scatter charts points. Null when no chart helps."
    )
    lineage: dict[str, Any] | None = Field(
        description='{"_type": "data_lineage", datasets, joins, filters, timeWindow, grain}'
    )
    caveats: list[str] = Field(description="What the verifier flagged about the result.")
    assumptions: list[str] = Field(description="What the planner assumed to make the question precise.")
    sql: str | None = Field(description="The query that ran, as the gate rebuilt it.")
    columns: list[str]
    rows: list[list[Cell]] = Field(description=f"The first {ROWS_IN_RESULT} rows of the result.")
    rowCount: int = Field(description="Rows the query returned (at most 10,000).")
    truncated: bool = Field(description="True when the query had more rows than it returned.")
    clarification: dict[str, Any] | None = Field(
        description='{"_type": "clarification_request", "questions": [{question, suggestions}]}'
    )
    missingDatasets: list[str] = Field(description="When it cannot answer: the data it lacks.")
    availableDatasets: list[str] = Field(description="The ontology's datasets.")


class _AskBetweenCalls(Exception):
    """Protocol 2026-07-28 has no back-channel: the questions leave in an ``InputRequiredResult``
    and the answers arrive with the client's next call."""

    def __init__(self, questions: Sequence[ClarifyingQuestion]) -> None:
        super().__init__("clarification needed")
        self.questions = list(questions)


def _clarify_schema(questions: Sequence[ClarifyingQuestion]) -> dict[str, Any]:
    properties = {
        f"answer{i}": {
            "type": "string",
            "title": q.question,
            **({"description": f"For example: {'; '.join(q.suggestions)}"} if q.suggestions else {}),
        }
        for i, q in enumerate(questions, start=1)
    }
    return {"type": "object", "properties": properties, "required": list(properties)}


def _answers(questions: Sequence[str], reply: ElicitResult | None) -> list[tuple[str, str]]:
    if reply is None or reply.action != "accept" or not reply.content:
        return []
    answers = [
        (q, str(reply.content.get(f"answer{i}") or "").strip()) for i, q in enumerate(questions, start=1)
    ]
    return [(q, a) for q, a in answers if a]


class _ClientAsker:
    """Progress notifications, and clarification by elicitation where the client offers it."""

    def __init__(self, ctx: Context, *, may_ask: bool) -> None:
        self.ctx = ctx
        self.may_ask = may_ask

    async def progress(self, step: int, total: int, message: str) -> None:
        await self.ctx.report_progress(step, total, message)

    async def clarify(self, questions: Sequence[ClarifyingQuestion]) -> list[tuple[str, str]] | None:
        if not self.may_ask:
            return None
        if client_asks_between_calls(self.ctx):
            if not client_offers_forms(self.ctx):
                return None
            raise _AskBetweenCalls(questions)
        reply = await client_elicit_optional(
            self.ctx, message=CLARIFY_MESSAGE, schema=_clarify_schema(questions)
        )
        return _answers([q.question for q in questions], reply) or None


def _earlier_round(ctx: Context) -> tuple[bool, list[tuple[str, str]]]:
    """Whether this call answers an earlier round's questions, and the answers given.

    The SDK unseals ``requestState`` before the tool runs, so it is state this server minted for
    this caller and these arguments, not something the client made up."""
    state = input_state(ctx)
    if state is None:
        return False, []
    questions = [str(q) for q in state.get("questions", [])]
    reply = (ctx.input_responses or {}).get(CLARIFY_INPUT)
    return True, _answers(questions, reply if isinstance(reply, ElicitResult) else None)


@tool(
    name="ask_question",
    title="Ask a question of your data",
    description=(
        "Answer a question about your tenant's data in plain language, from one ontology (see the "
        "gatehouse://ontologies resource). Returns a markdown answer, chart specifications when a chart "
        "helps, the data lineage (datasets, joins, filters, time window, grain) and caveats. When the "
        "question is ambiguous it returns a clarification_request instead: ask the person, then ask "
        "again with the answers folded into the question."
    ),
    scopes=[SCOPE_ONTOLOGIES_READ, SCOPE_DATA_AGENT_WRITE],
    read_only=True,
    # The run enforces its own limit with a clearer message; this is the backstop.
    timeout_seconds=lambda: question_timeout_seconds() + 15,
    expensive=True,
    # A run takes tens of seconds: a 2026-07-28 client with the tasks extension gets a task at
    # once and follows it, and a clarification becomes the task's input_required.
    task_support="optional",
)
async def ask_question(
    ontologyId: OntologyId,
    question: Annotated[
        str,
        StringConstraints(min_length=1, max_length=QUESTION_MAX_CHARS, pattern=r"\S"),
        Field(description="The question, in plain language."),
    ],
    ctx: Context,
) -> Annotated[CallToolResult, AskAnswer] | InputRequiredResult:
    identity = identity_from_context(ctx)
    context = await db_call(
        question_context_load, tenant_id=identity.tenant_id, user_id=identity.user_id, ontology_id=ontologyId
    )
    answered_before, clarifications = _earlier_round(ctx)
    # One round of questions at most: a person who declined is not asked again.
    run = QuestionRun(
        context=context,
        asker=_ClientAsker(ctx, may_ask=not answered_before),
        use=ModelUse(identity=identity, feature=Feature.ASK_QUESTION),
    )
    limit = question_timeout_seconds()
    try:
        async with asyncio.timeout(limit):
            outcome = await run.answer(question.strip(), clarifications=clarifications)
        audit_note(status=outcome.status, rowCount=outcome.result.row_count if outcome.result else None)
    except _AskBetweenCalls as asking:
        audit_note(status="input_required")
        form = ask_form(message=CLARIFY_MESSAGE, schema=_clarify_schema(asking.questions))
        return input_required(
            ctx, {CLARIFY_INPUT: form}, state={"questions": [q.question for q in asking.questions]}
        )
    except TimeoutError:
        raise Timeout(
            f"The question took longer than {limit:g} s to answer and was stopped "
            f"(while: {run.phase.lower()}).",
            data={"timeoutSeconds": limit, "phase": run.phase},
        ) from None
    finally:
        # Whatever the outcome: which SQL ran on the tenant's data, and what the model cost.
        audit_note(
            sql=run.sql,
            phase=run.phase,
            modelCalls=run.usage.calls,
            promptTokens=run.usage.prompt_tokens,
            completionTokens=run.usage.completion_tokens,
        )
    return answer_result(outcome)


def answer_result(outcome: Outcome) -> CallToolResult:
    """The outcome as content blocks (narrative, chart_specs, data_lineage, caveats, in that order,
    then the structured content as JSON) and as structured content carrying the same data."""
    result = outcome.result
    answer = AskAnswer(
        status=outcome.status,
        question=outcome.question,
        narrative="",
        chartSpecs={"_type": "chart_specs", "charts": outcome.charts} if outcome.charts else None,
        lineage=outcome.lineage,
        caveats=outcome.caveats,
        assumptions=outcome.assumptions,
        sql=outcome.sql,
        columns=result.columns if result else [],
        rows=result.rows[:ROWS_IN_RESULT] if result else [],
        rowCount=result.row_count if result else 0,
        truncated=result.truncated if result else False,
        clarification=None,
        missingDatasets=outcome.missing,
        availableDatasets=outcome.available,
    )
    blocks: list[str] = []
    if outcome.status == "clarification_needed":
        answer.clarification = {
            "_type": "clarification_request",
            "questions": [q.model_dump() for q in outcome.clarifications],
        }
        answer.narrative = "The question needs clarifying before it can be answered."
        blocks.append(json.dumps(answer.clarification, ensure_ascii=False))
    elif outcome.status == "cannot_answer":
        answer.narrative = (
            f"This cannot be answered from the datasets available. Missing: {'; '.join(outcome.missing)}. "
            f"Available datasets: {', '.join(outcome.available) or 'none'}."
        )
        blocks.append(answer.narrative)
    else:
        answer.narrative = _narrative(outcome)
        blocks.append(answer.narrative)
        if answer.chartSpecs is not None:
            blocks.append(json.dumps(answer.chartSpecs, ensure_ascii=False))
        blocks.append(json.dumps(outcome.lineage, ensure_ascii=False))
        if outcome.caveats:
            blocks.append("\n".join(f"{CAVEAT_SIGN} {c}" for c in outcome.caveats))
    # The whole answer as JSON last, for a client that shows its model only text.
    return tool_result(structured=answer.model_dump(mode="json"), summary=blocks)


def _narrative(outcome: Outcome) -> str:
    result = outcome.result
    if result is None or not result.columns:
        return outcome.narrative
    parts = [outcome.narrative, _markdown_table(result.columns, result.rows[:ROWS_IN_NARRATIVE])]
    if result.row_count > ROWS_IN_NARRATIVE:
        more = "more than " if result.truncated else ""
        parts.append(f"_First {ROWS_IN_NARRATIVE} of {more}{result.row_count:,} rows._")
    return "\n\n".join(p for p in parts if p)


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(_cell(c) for c in columns) + " |",
        "|" + "|".join(" --- " for _ in columns) + "|",
        *("| " + " | ".join(_cell(v) for v in row) + " |" for row in rows),
    ]
    return "\n".join(lines)
