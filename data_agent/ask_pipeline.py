"""``ask_question``'s pipeline: planner, navigator, SQL builder, executor, verifier, explainer.

Every model call goes through the governed path (``language_models.governed``) with the tenant's model.
What may run is decided by code, never by a prompt: the builder's SQL passes the gate over the
ontology's tables and runs read-only, time- and row-limited, exactly as ``run_query`` does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal, Protocol, TypeVar

from django.utils import timezone
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from core.errors import InvalidInput
from data_agent import ask_prompts as prompts
from data_agent.ask_schemas import (
    ClarifyingQuestion,
    ExplainerReply,
    NavigatorReply,
    PlannerReply,
    ReplyUnusable,
    SqlBuilderReply,
    VerifierReply,
    phase_reply_parse,
)
from data_agent.catalogue import catalogue_get_sync
from data_agent.charts import ChartUnusable, chart_spec_build
from data_agent.executor import DEFAULT_MAX_ROWS, QueryResult
from data_agent.query_pool import QuerySource, query_run_fairly
from data_agent.query_run import QueryRun
from data_agent.query_slots import QueryCaller
from data_agent.result_checks import result_findings
from data_agent.selectors import Catalog, agent_preference_get
from language_models.governed import Completion, ModelUse, model_complete
from language_models.selectors import ModelConfig, language_model_for_tenant

logger = logging.getLogger(__name__)

PHASES = (
    "Planning",
    "Choosing datasets",
    "Writing SQL",
    "Running the query",
    "Checking the result",
    "Writing the answer",
)
SQL_ATTEMPTS = 2

ReplyT = TypeVar("ReplyT", bound=BaseModel)


class Asker(Protocol):
    """How a run reaches the person asking: progress, and questions when it needs clarification."""

    async def progress(self, step: int, total: int, message: str) -> None: ...

    async def clarify(self, questions: Sequence[ClarifyingQuestion]) -> list[tuple[str, str]] | None:
        """The person's answers, or None when they cannot be asked now (or declined)."""
        ...


@dataclass
class ModelUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class QuestionContext:
    catalog: Catalog
    source_url: str = field(repr=False)
    # Whose question, on which data source: the fair-use limits count the query against both.
    source_id: int
    caller: QueryCaller
    model: ModelConfig
    preferences: dict[str, str]
    today: date


@dataclass
class Outcome:
    status: Literal["answered", "clarification_needed", "cannot_answer"]
    question: str
    narrative: str = ""
    assumptions: list[str] = field(default_factory=list)
    charts: list[dict[str, Any]] = field(default_factory=list)
    lineage: dict[str, Any] | None = None
    caveats: list[str] = field(default_factory=list)
    sql: str | None = None
    result: QueryResult | None = None
    clarifications: list[ClarifyingQuestion] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    available: list[str] = field(default_factory=list)


def question_context_load(*, tenant_id: int, user_id: int, ontology_id: str) -> QuestionContext:
    """Everything a run reads from Gatehouse's database, in one go before any model is called.

    Raises NotFound for an ontology the caller's tenant has no ready one of, and
    NoModelConfigured when the tenant has no language model."""
    catalogue = catalogue_get_sync(tenant_id=tenant_id, ontology_id=ontology_id)
    model = language_model_for_tenant(tenant_id=tenant_id)
    preference = agent_preference_get(user_id=user_id, tenant_id=tenant_id)
    preferences = {}
    if preference.default_time_period:
        preferences["default time period"] = preference.default_time_period
    if preference.notes:
        preferences["notes"] = preference.notes
    return QuestionContext(
        catalog=catalogue.catalog,
        source_url=catalogue.source.url,
        source_id=catalogue.source.id,
        caller=QueryCaller(tenant_id=tenant_id, user_id=user_id),
        model=model,
        preferences=preferences,
        today=timezone.localdate(),
    )


class QuestionRun:
    """One question, phase by phase. ``phase`` names where it is, for a timeout's message."""

    def __init__(self, *, context: QuestionContext, asker: Asker, use: ModelUse) -> None:
        self.context = context
        self.asker = asker
        self.use = use
        self.phase = PHASES[0]
        self.usage = ModelUsage()
        # The SQL that last ran, whatever happens after it (for the audit trail).
        self.sql: str | None = None

    async def _enter(self, step: int) -> None:
        self.phase = PHASES[step - 1]
        await self.asker.progress(step, len(PHASES), f"{self.phase}…")

    async def _model(self, purpose: str, messages: prompts.Messages, reply: type[ReplyT]) -> ReplyT:
        """The model's answer as ``reply``; an unusable answer is sent back once with the problem."""
        completion = await self._complete(purpose, messages)
        try:
            return phase_reply_parse(completion.text, reply)
        except ReplyUnusable as problem:
            logger.info("The %s's answer was unusable (%s); asking again", purpose, problem)
            retry = [
                *messages,
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": f"{problem} Reply with only the JSON object described."},
            ]
        completion = await self._complete(purpose, retry)
        try:
            return phase_reply_parse(completion.text, reply)
        except ReplyUnusable as problem:
            raise ToolError(
                f"The language model's answer in phase '{self.phase}' could not be used, twice: {problem} "
                "Try again, rephrase the question, or write the SQL yourself with run_query."
            ) from None

    async def _complete(self, purpose: str, messages: prompts.Messages) -> Completion:
        completion = await model_complete(
            use=self.use, config=self.context.model, messages=messages, purpose=purpose
        )
        self.usage.calls += 1
        self.usage.prompt_tokens += completion.prompt_tokens
        self.usage.completion_tokens += completion.completion_tokens
        return completion

    async def answer(self, question: str, *, clarifications: Sequence[tuple[str, str]] = ()) -> Outcome:
        """``clarifications`` are the person's answers to an earlier round's questions (protocol
        2026-07-28 asks between two calls): the planner gets them at once and is not asked to
        clarify again."""
        started = time.monotonic()
        outcome = await self._answer(question, clarifications)
        logger.info(
            "Question answered: %s after %d model calls in %.1f s",
            outcome.status,
            self.usage.calls,
            time.monotonic() - started,
        )
        return outcome

    async def _answer(self, question: str, clarifications: Sequence[tuple[str, str]]) -> Outcome:
        catalog = self.context.catalog
        available = [d.name for d in catalog.datasets]

        await self._enter(1)
        plan = await self._plan(question, clarifications=clarifications)
        if plan.action == "clarify" and plan.clarifications:
            answers = None if clarifications else await self.asker.clarify(plan.clarifications)
            if not answers:
                return Outcome("clarification_needed", question, clarifications=plan.clarifications)
            plan = await self._plan(question, clarifications=answers)
            if plan.action == "clarify":
                return Outcome("clarification_needed", question, clarifications=plan.clarifications)
        if plan.action == "cannot_answer":
            return self._cannot_answer(question, plan.missingData or ["data this question needs"], available)
        restated = plan.restatedQuestion or question

        await self._enter(2)
        route = await self._model(
            "navigator", prompts.navigator_messages(question=restated, catalog=catalog), NavigatorReply
        )
        unknown = [name for name in route.datasets if catalog.dataset(name) is None]
        chosen = [name for name in route.datasets if catalog.dataset(name) is not None]
        if route.missing or unknown or not chosen:
            return self._cannot_answer(
                question, [*route.missing, *unknown] or ["a matching dataset"], available
            )

        run = await self._query(restated, plan.assumptions, chosen)
        gated, result = run.gated, run.result

        await self._enter(5)
        findings = result_findings(gated=gated, result=result, catalog=catalog)
        check = await self._model(
            "verifier",
            prompts.verifier_messages(question=restated, sql=gated.sql, result=result, findings=findings),
            VerifierReply,
        )
        caveats = list(dict.fromkeys([*findings, *(c.strip() for c in check.caveats if c.strip())]))

        await self._enter(6)
        explained = await self._model(
            "explainer",
            prompts.explainer_messages(
                question=restated, sql=gated.sql, result=result, caveats=caveats, assumptions=plan.assumptions
            ),
            ExplainerReply,
        )
        charts = []
        if explained.chart is not None:
            try:
                charts.append(
                    chart_spec_build(choice=explained.chart, columns=result.columns, rows=result.rows)
                )
            except ChartUnusable as problem:
                logger.info("Dropped the explainer's chart: %s", problem)
        return Outcome(
            "answered",
            question,
            narrative=explained.narrative.strip(),
            assumptions=plan.assumptions,
            charts=charts,
            lineage=run.lineage,
            caveats=caveats,
            sql=gated.sql,
            result=result,
            available=available,
        )

    async def _plan(self, question: str, *, clarifications: Sequence[tuple[str, str]]) -> PlannerReply:
        messages = prompts.planner_messages(
            question=question,
            catalog=self.context.catalog,
            today=self.context.today,
            preferences=self.context.preferences,
            clarifications=clarifications,
        )
        return await self._model("planner", messages, PlannerReply)

    async def _query(self, question: str, assumptions: Sequence[str], datasets: Sequence[str]) -> QueryRun:
        """The builder's SQL, gated and run; a refusal (by the gate or the database) goes back to
        the builder once with the reason."""
        context = self.context
        messages = prompts.sql_builder_messages(
            question=question,
            assumptions=assumptions,
            catalog=context.catalog,
            datasets=datasets,
            today=context.today,
            max_rows=DEFAULT_MAX_ROWS,
        )
        for attempt in range(1, SQL_ATTEMPTS + 1):
            await self._enter(3)
            built = await self._model("sql_builder", messages, SqlBuilderReply)
            await self._enter(4)
            try:
                source = QuerySource(
                    id=context.source_id,
                    kind=context.catalog.dialect,
                    url=context.source_url,
                    allowed_tables=context.catalog.source_tables,
                    datasets_by_table=context.catalog.datasets_by_table,
                )
                run = await query_run_fairly(caller=context.caller, source=source, sql=built.sql)
                self.sql = run.gated.sql
                return run
            except InvalidInput as refusal:
                problem = _refusal_text(refusal)
                if attempt == SQL_ATTEMPTS:
                    raise ToolError(
                        f"The data agent could not write a query the gate and database accept ({problem}). "
                        "Rephrase the question, or write the SQL yourself with run_query."
                    ) from None
                logger.info("The builder's query was refused (%s); asking again", problem)
                messages = [*messages, *prompts.sql_retry_message(sql=built.sql, problem=problem)]
        raise AssertionError("unreachable")

    @staticmethod
    def _cannot_answer(question: str, missing: list[str], available: list[str]) -> Outcome:
        return Outcome("cannot_answer", question, missing=list(dict.fromkeys(missing)), available=available)


def _refusal_text(refusal: InvalidInput) -> str:
    detail = (refusal.data or {}).get("detail")
    return f"{refusal.message} {detail}" if isinstance(detail, str) and detail else refusal.message
