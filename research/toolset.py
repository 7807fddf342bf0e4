"""The ``research`` toolset: human-in-the-loop literature searches (``research.literature_job``)."""

from __future__ import annotations

from mcp_gateway.registry import Toolset
from research.tasks import literature_tasks

toolset = Toolset(
    name="research",
    description="Literature searches that wait for your decisions: plan, screening, final selection.",
    tools=(),
    tasks=literature_tasks,
)
