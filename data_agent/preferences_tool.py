"""A person's standing instructions to the data agent (``get_data_preferences``,
``set_data_preferences``); ``ask_question``'s planner reads them."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field, StringConstraints

from core.db import db_call
from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from data_agent.models import AgentPreference
from data_agent.scopes import SCOPE_DATA_AGENT_WRITE, SCOPE_ONTOLOGIES_READ
from data_agent.selectors import agent_preference_get
from data_agent.services import agent_preference_set
from mcp_gateway.kernel.identity import identity_from_context
from mcp_gateway.kernel.registry import tool

TIME_PERIOD_MAX = AgentPreference._meta.get_field("default_time_period").max_length or 100
NOTES_MAX = AgentPreference._meta.get_field("notes").max_length or 1000


class DataPreferences(BaseModel):
    defaultTimePeriod: str = Field(description="Used when a question names no period; empty for none.")
    notes: str = Field(description="Anything else the data agent should assume; empty for none.")


def _as_answer(preference: AgentPreference) -> DataPreferences:
    return DataPreferences(defaultTimePeriod=preference.default_time_period, notes=preference.notes)


@tool(
    name="get_data_preferences",
    title="My data agent preferences",
    description="Return the caller's data agent preferences in this tenant (default time period, notes).",
    # Anyone who may read the tenant's data catalogue, viewers included, may read their own
    # preferences (the caller's only: the tool takes no one else's id); changing them needs more.
    scopes=[SCOPE_ONTOLOGIES_READ],
)
async def get_data_preferences(ctx: Context) -> DataPreferences:
    identity = identity_from_context(ctx)
    preference = await db_call(agent_preference_get, user_id=identity.user_id, tenant_id=identity.tenant_id)
    return _as_answer(preference)


@tool(
    name="set_data_preferences",
    title="Set my data agent preferences",
    description=(
        "Change the caller's data agent preferences in this tenant. ask_question uses them: the default "
        "time period applies when a question names none; notes state standing assumptions (a fiscal "
        "year start, say). Omit a preference to keep it; pass an empty string to clear it."
    ),
    scopes=[SCOPE_DATA_AGENT_WRITE],
    read_only=False,
)
async def set_data_preferences(
    ctx: Context,
    defaultTimePeriod: Annotated[
        str | None,
        StringConstraints(max_length=TIME_PERIOD_MAX),
        Field(description="For example 'last 12 months', 'this quarter' or '2025'."),
    ] = None,
    notes: Annotated[
        str | None,
        StringConstraints(max_length=NOTES_MAX),
        Field(description="For example 'our fiscal year starts on 1 April'."),
    ] = None,
) -> DataPreferences:
    # PostgreSQL's text cannot hold NUL: refuse with the reason rather than fail in the database.
    for name, value in (("defaultTimePeriod", defaultTimePeriod), ("notes", notes)):
        problem = text_unstorable_reason(value)
        if problem is not None:
            raise InvalidInput(f"{name} {problem}.", data={"reason": "unstorable_text", "argument": name})
    identity = identity_from_context(ctx)
    preference = await db_call(
        agent_preference_set,
        user_id=identity.user_id,
        tenant_id=identity.tenant_id,
        default_time_period=defaultTimePeriod,
        notes=notes,
    )
    return _as_answer(preference)
