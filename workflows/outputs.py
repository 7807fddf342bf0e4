"""The shapes every workflow tool answers with: ``CommandOutput`` and its trace events.

Published as the tools' output schemas, so a client's validator sees concrete types: every field
is a plain JSON type or a list/object of them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

JsonValue = str | int | float | bool | None | list[Any] | dict[str, Any]


class CommandResponse(BaseModel):
    response: str = Field(description="What the command did, in words.")
    artifacts: dict[str, Any] = Field(
        default_factory=dict,
        description="The command's data: a query's columns and rows, a tool's structured content.",
    )
    next_actions: list[str] = Field(default_factory=list, description="Commands that may follow.")
    recommendations: list[str] = Field(default_factory=list, description="Advice for the caller.")


class TraceEvent(BaseModel):
    timestamp: int = Field(description="Milliseconds since the Unix epoch.")
    direction: Literal["agent_to_workflow", "workflow_to_agent"]
    raw_command: str = Field(description="The command text as planned.")
    command_name: str
    parameters: dict[str, Any] = Field(default_factory=dict)
    response_text: str = Field(default="", description="Empty on the agent's request, the answer after.")
    success: bool = True


class CommandOutput(BaseModel):
    success: bool
    workflow_name: str
    context: str = Field(description="The session's context after the command.")
    command_name: str = Field(description="The qualified name (context/Name) that ran, or '' if none.")
    command_parameters: dict[str, Any] = Field(default_factory=dict)
    command_responses: list[CommandResponse] = Field(default_factory=list)
    traces: list[TraceEvent] | None = Field(
        default=None,
        description="The turn's trace events; absent when they were streamed as notifications.",
    )
