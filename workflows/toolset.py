"""The workflows toolset: a tenant's workflow commands, its assistant and agent, and each person's
conversations with them. Off until a tenant has a workflow (the demo and ``import_workflow`` turn
it on)."""

from __future__ import annotations

from mcp_gateway.kernel.registry import Toolset
from workflows.prompts import PROMPTS, install
from workflows.session_tools import (
    activate_conversation,
    get_commands,
    get_workflow_info,
    initialize,
    list_conversations,
    new_conversation,
    post_feedback,
)
from workflows.turn_tools import execute_command, invoke_agent, invoke_assistant

toolset = Toolset(
    name="workflows",
    description="Your tenant's workflow: its commands, an assistant and an agent, and your conversations.",
    tools=(
        initialize,
        get_workflow_info,
        get_commands,
        execute_command,
        invoke_assistant,
        invoke_agent,
        new_conversation,
        list_conversations,
        activate_conversation,
        post_feedback,
    ),
    enabled_by_default=False,
    install=install,
    prompts=PROMPTS,
)
