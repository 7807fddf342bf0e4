"""The LLM gateway's scope, registered when the app loads (``llm_gateway.models`` imports this).

Calling a language model spends the tenant's money, so it is for the roles that may already do so
through other tools (the data agent's questions, the workflow agent): admin and contributor.
"""

from __future__ import annotations

from accounts.models import Role
from accounts.scopes import scope_register

SCOPE_LLM_INVOKE = "llm:invoke"

SCOPE_USAGE_READ = "usage:read"

scope_register(
    name=SCOPE_USAGE_READ,
    description="Read what your tenant spent on language models (usage totals per day, model and feature)",
    roles=[Role.ADMIN],
)

scope_register(
    name=SCOPE_LLM_INVOKE,
    description="Call your tenant's language models through Gatehouse, within its budgets",
    roles=[Role.ADMIN, Role.CONTRIBUTOR],
)
