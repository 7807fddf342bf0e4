"""The data agent's scopes, registered when the app loads (``data_agent.models`` imports this)."""

from __future__ import annotations

from accounts.models import Role
from accounts.scopes import scope_register

SCOPE_ONTOLOGIES_READ = "ontologies:read"
SCOPE_DATA_AGENT_WRITE = "data_agent:write"

scope_register(
    name=SCOPE_ONTOLOGIES_READ,
    description="Read your tenant's data catalogue and your own data agent preferences",
    roles=[Role.ADMIN, Role.CONTRIBUTOR, Role.VIEWER],
)
scope_register(
    name=SCOPE_DATA_AGENT_WRITE,
    description=(
        "Run queries and ask questions on your tenant's data sources (reading the data, and using"
        " your tenant's language model), and change your data agent preferences"
    ),
    roles=[Role.ADMIN, Role.CONTRIBUTOR],
)
