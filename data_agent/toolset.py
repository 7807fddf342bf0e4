"""The data agent toolset: a tenant's data catalogue (resources) and read-only questions of it."""

from __future__ import annotations

from data_agent.ask_tool import ask_question
from data_agent.preferences_tool import get_data_preferences, set_data_preferences
from data_agent.query_tool import run_query
from data_agent.resources import CATALOGUE, install
from mcp_gateway.kernel.registry import Toolset

toolset = Toolset(
    name="data_agent",
    description="Your tenant's data catalogue (ontologies) and read-only questions of its data.",
    tools=(ask_question, run_query, get_data_preferences, set_data_preferences),
    # Off until a tenant connects a data source; the demo bootstrap turns it on for acme.
    enabled_by_default=False,
    install=install,
    resources=(CATALOGUE,),
)
