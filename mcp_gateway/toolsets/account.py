"""The account toolset: who the caller is, and the one thing they may change about themselves."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field, StringConstraints

from accounts.scopes import SCOPE_READ, SCOPE_WRITE
from accounts.services import DISPLAY_NAME_MAX, user_set_display_name
from core.db import db_call
from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from mcp_gateway.kernel.identity import identity_from_context
from mcp_gateway.kernel.registry import Toolset, tool


class UserInfo(BaseModel):
    id: int
    username: str


class TenantInfo(BaseModel):
    slug: str
    name: str


class ClientInfo(BaseModel):
    client_id: str
    name: str


class WhoAmI(BaseModel):
    user: UserInfo
    tenant: TenantInfo
    role: str = Field(description="The caller's role in the tenant: admin, contributor or viewer.")
    scopes: list[str] = Field(description="The OAuth scopes in force for this call.")
    client: ClientInfo


class DisplayName(BaseModel):
    display_name: str


@tool(
    name="whoami",
    title="Who am I",
    description="Return the caller's identity: user, tenant, role, scopes in force and OAuth client.",
    scopes=[SCOPE_READ],
)
async def whoami(ctx: Context) -> WhoAmI:
    identity = identity_from_context(ctx)
    return WhoAmI(
        user=UserInfo(id=identity.user_id, username=identity.username),
        tenant=TenantInfo(slug=identity.tenant_slug, name=identity.tenant_name),
        role=identity.role,
        scopes=sorted(identity.scopes),
        client=ClientInfo(client_id=identity.client_id, name=identity.client_name),
    )


@tool(
    name="set_display_name",
    title="Set my display name",
    description="Change the caller's display name, as other people in the tenant will see it.",
    scopes=[SCOPE_WRITE],
    read_only=False,
)
async def set_display_name(
    display_name: Annotated[
        str,
        # The pattern puts "not blank" in the published input schema, so it is checked at the boundary.
        StringConstraints(strip_whitespace=True, min_length=1, max_length=DISPLAY_NAME_MAX, pattern=r"\S"),
    ],
    ctx: Context,
) -> DisplayName:
    # PostgreSQL cannot store NUL, nor UTF-8 an unpaired surrogate: refuse them here, saying so,
    # rather than let the database fail the call as "unavailable".
    unstorable = text_unstorable_reason(display_name)
    if unstorable is not None:
        raise InvalidInput(f"display_name {unstorable}.", data={"field": "display_name"})
    identity = identity_from_context(ctx)
    user = await db_call(user_set_display_name, user_id=identity.user_id, display_name=display_name)
    return DisplayName(display_name=user.display_name)


toolset = Toolset(
    name="account",
    description="The caller's own identity.",
    tools=(whoami, set_display_name),
)
