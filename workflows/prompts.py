"""Two prompts a client can send to its own model while it plans: ``format-command`` turns an intent
into the command syntax, ``clarify-params`` turns an execute_command refusal into a question for the
person. Plain text templates: they read no tenant data (the client passes what it learned from
``get_commands`` as ``metadata``)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from pydantic import Field

from workflows.syntax import EXPECTED_FORM

FORMAT_COMMAND = "format-command"
CLARIFY_PARAMS = "clarify-params"
PROMPTS = (FORMAT_COMMAND, CLARIFY_PARAMS)
ARGUMENT_MAX_CHARS = 20_000


def install(server: MCPServer) -> None:
    @server.prompt(
        name=FORMAT_COMMAND,
        title="Format a command",
        description=(
            "Turn an intent into exactly one workflow command in the syntax execute_command takes, using "
            "the commands' metadata (from get_commands)."
        ),
    )
    async def format_command(
        intent: Annotated[str, Field(max_length=ARGUMENT_MAX_CHARS)],
        metadata: Annotated[str, Field(max_length=ARGUMENT_MAX_CHARS)],
    ) -> list[Message]:
        return [
            UserMessage(
                "Write exactly one workflow command for the intent below, in the syntax "
                f"{EXPECTED_FORM}: the qualified command name, then each parameter as "
                "<name>value</name>. Use only commands and parameters listed in the metadata, give every "
                "required parameter, write dates as YYYY-MM-DD, and answer with the command alone.\n\n"
                f"Intent:\n{intent}\n\nCommands (metadata):\n{metadata}"
            )
        ]

    @server.prompt(
        name=CLARIFY_PARAMS,
        title="Ask for missing parameters",
        description=(
            "Turn an execute_command refusal (a missing or ill-typed parameter) into one short question for "
            "the person, using the command's metadata."
        ),
    )
    async def clarify_params(
        error_message: Annotated[str, Field(max_length=ARGUMENT_MAX_CHARS)],
        metadata: Annotated[str, Field(max_length=ARGUMENT_MAX_CHARS)],
    ) -> list[Message]:
        return [
            UserMessage(
                "A workflow command was refused. Ask the person, in one or two short sentences, for exactly "
                "the values it needs, naming each parameter's meaning and expected type (dates as "
                "YYYY-MM-DD). Do not guess values.\n\n"
                f"Refusal:\n{error_message}\n\nCommand metadata:\n{metadata}"
            )
        ]
