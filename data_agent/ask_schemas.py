"""What each LLM phase of ``ask_question`` must answer, and how its text becomes that.

Models answer in JSON; these models are the contract. A reply that is not valid JSON of the right
shape is sent back once with the validation error, then refused (``phase_reply_parse``).
"""

from __future__ import annotations

import json
import re
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.json_bounds import JsonTooDeep, json_loads_bounded

MAX_CLARIFYING_QUESTIONS = 3
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")

ReplyT = TypeVar("ReplyT", bound=BaseModel)


class _Reply(BaseModel):
    # Models add chatter fields; ignoring them costs nothing and saves a retry.
    model_config = ConfigDict(extra="ignore")


class ClarifyingQuestion(_Reply):
    question: str = Field(min_length=1, max_length=500)
    suggestions: list[str] = Field(default_factory=list, max_length=10)


class PlannerReply(_Reply):
    action: Literal["answer", "clarify", "cannot_answer"]
    restatedQuestion: str = ""
    assumptions: list[str] = Field(default_factory=list)
    clarifications: list[ClarifyingQuestion] = Field(default_factory=list)
    missingData: list[str] = Field(default_factory=list)

    @field_validator("clarifications")
    @classmethod
    def _at_most_three(cls, value: list[ClarifyingQuestion]) -> list[ClarifyingQuestion]:
        # A model that asks five questions still asks the three it listed first.
        return value[:MAX_CLARIFYING_QUESTIONS]


class NavigatorJoin(_Reply):
    left: str = Field(description="dataset.field")
    right: str = Field(description="dataset.field")


class NavigatorReply(_Reply):
    datasets: list[str] = Field(default_factory=list)
    joins: list[NavigatorJoin] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    notes: str = ""


class SqlBuilderReply(_Reply):
    sql: str = Field(min_length=1)
    explanation: str = ""


class VerifierReply(_Reply):
    ok: bool = True
    caveats: list[str] = Field(default_factory=list)


class ChartChoice(_Reply):
    type: Literal["bar", "line", "pie", "scatter"]
    title: str = ""
    x: str = Field(description="The column for categories, slice labels or the x axis.")
    y: list[str] = Field(min_length=1, description="The value column(s).")

    @field_validator("y", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class ExplainerReply(_Reply):
    narrative: str = Field(min_length=1)
    chart: ChartChoice | None = None


class ReplyUnusable(ValueError):
    """The model's text is not the JSON this phase needs; the message says what was wrong."""


def phase_reply_parse(text: str, model: type[ReplyT]) -> ReplyT:
    """The first JSON object in ``text`` (code fences and surrounding prose tolerated) as ``model``."""
    stripped = _FENCE.sub("", text.strip())
    start, end = stripped.find("{"), stripped.rfind("}")
    if start < 0 or end <= start:
        raise ReplyUnusable("The answer held no JSON object.")
    try:
        # A model's text is input like any client's: bounded in depth like every parser's.
        data = json_loads_bounded(stripped[start : end + 1])
    except JsonTooDeep as error:
        raise ReplyUnusable(f"The JSON did not parse: {error}") from None
    except json.JSONDecodeError as error:
        raise ReplyUnusable(f"The JSON did not parse: {error.msg} at character {error.pos}.") from None
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in error.errors()[:5]
        )
        raise ReplyUnusable(f"The JSON did not have the expected shape: {problems}.") from None
