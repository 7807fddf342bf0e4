"""The ``research`` toolset: human-in-the-loop literature searches (``research.literature_job``),
through the tools of ``research.tools``.

Off until a tenant turns it on (``manage.py toolsets``), like every toolset that spends something
outside Gatehouse: a search calls OpenAlex, Crossref and arXiv (their rate limits are shared by
every tenant of the deployment), and its steps take a worker's time.
"""

from __future__ import annotations

from mcp_gateway.kernel.registry import Toolset
from research.tasks import literature_tasks
from research.tools import TOOLS

toolset = Toolset(
    name="research",
    description="Literature searches that wait for your decisions: plan, screening, final selection.",
    tools=TOOLS,
    enabled_by_default=False,
    # search_papers as an MCP task (protocol 2025-11-25): the task is the job (docs/mcp-tasks.md).
    tasks=literature_tasks,
)
