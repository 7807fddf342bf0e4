"""What the conformance suite's list-change fixtures (``test_trigger_tool_change``,
``test_trigger_prompt_change`` in ``conformance_stateless``) turn on and off for the caller's tenant,
so a tenant's tool and prompt lists change for real, the way an operator changes them. Off by
default; nothing else depends on it."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import ContentBlock, TextContent

from accounts.scopes import SCOPE_READ
from mcp_gateway.kernel.registry import Toolset, tool

NAME = "conformance_dynamic"
PROMPT = "test_dynamic_prompt"


@tool(
    name="test_dynamic_tool",
    description="Listed while the conformance suite has switched it on for this tenant.",
    scopes=[SCOPE_READ],
    structured=False,
)
async def test_dynamic_tool() -> list[ContentBlock]:
    return [TextContent(type="text", text="This tool comes and goes with the conformance_dynamic toolset.")]


def install(server: MCPServer) -> None:
    @server.prompt(name=PROMPT, description="Listed while the conformance suite has switched it on.")
    async def dynamic_prompt() -> list[Message]:
        return [UserMessage("This prompt comes and goes with the conformance_dynamic toolset.")]


toolset = Toolset(
    name=NAME,
    description="A tool and a prompt the conformance suite switches on and off. Off by default.",
    tools=(test_dynamic_tool,),
    enabled_by_default=False,
    install=install,
    prompts=(PROMPT,),
)
