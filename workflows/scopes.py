"""The workflow toolset's scopes, registered when the app loads (``workflows.models`` imports this).

Reading a workflow and managing one's own conversations is for every role; running commands too,
because each command is also checked against the scopes of what it runs (a viewer never runs a
command whose tool or query needs a scope they lack). Handing a request to the tenant's language
model, which spends money, is for roles that may already do so elsewhere.
"""

from __future__ import annotations

from accounts.models import Role
from accounts.scopes import scope_register

SCOPE_WORKFLOWS_READ = "workflows:read"
SCOPE_WORKFLOWS_RUN = "workflows:run"
SCOPE_WORKFLOWS_AGENT = "workflows:agent"

scope_register(
    name=SCOPE_WORKFLOWS_READ,
    description="See your tenant's workflow and its commands, and keep your own conversations with it",
    roles=[Role.ADMIN, Role.CONTRIBUTOR, Role.VIEWER],
)
scope_register(
    name=SCOPE_WORKFLOWS_RUN,
    description="Run your tenant's workflow commands, each within what your role allows",
    roles=[Role.ADMIN, Role.CONTRIBUTOR, Role.VIEWER],
)
scope_register(
    name=SCOPE_WORKFLOWS_AGENT,
    description=(
        "Let your tenant's language model plan and run workflow commands for you, and write your"
        " conversations' topics and summaries"
    ),
    roles=[Role.ADMIN, Role.CONTRIBUTOR],
)
