"""A stand-in for the research toolset's ``search_papers``, for the MCP tasks tests only, until the
real tool is on the branch: it starts the job through ``research.services`` and answers as the tool
does (``search_next_state`` after the bounded wait), and its toolset declares the real task source
(``research.tasks.literature_tasks``). Loaded only by the tasks tests' own server."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from accounts.scopes import SCOPE_WRITE
from core.db import db_call
from jobs.waiting import job_wait
from mcp_gateway.identity import identity_from_context
from mcp_gateway.registry import Toolset, tool
from research.services import WAIT_SECONDS, search_next_state, search_start
from research.tasks import literature_tasks


@tool(
    name="search_papers",
    description="Start a literature search (stand-in for the tasks tests).",
    scopes=[SCOPE_WRITE],
    read_only=False,
)
async def search_papers(
    ctx: Context, query: str, domain: str = "general", max_results: int = 100
) -> dict[str, Any]:
    identity = identity_from_context(ctx)
    job = await db_call(
        search_start,
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        query=query,
        domain=domain,
        max_results=max_results,
    )
    job = await job_wait(
        tenant_id=identity.tenant_id, user_id=identity.user_id, job_id=job.id, timeout_seconds=WAIT_SECONDS
    )
    return search_next_state(job=job)


toolset = Toolset(
    name="research_standin",
    description="search_papers for the MCP tasks tests.",
    tools=(search_papers,),
    tasks=literature_tasks,
)
