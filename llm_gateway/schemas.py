"""The gateway's request and response shapes, shared by the REST API (django-ninja validates bodies
and writes the OpenAPI document from them) and the ``llm_invoke`` MCP tool (the SDK writes its input
and output schemas from them), so both channels take and give exactly the same JSON.

Bounds here are the boundary's: types, lengths, counts, ranges. What needs the tenant or litellm
(is the provider known, is the schema a JSON Schema, is an ``extra`` key allowed) is checked by the
service (``llm_gateway.invoke``) with the same error shape.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeAliasType

# A message is a chat turn, not a document store: 200k characters is a long book chapter.
MAX_MESSAGE_CHARACTERS = 200_000
MAX_MESSAGES = 200
MAX_OUTPUT_TOKENS = 128_000
# A provider name as litellm spells them: openai, anthropic, deepseek, gemini, ollama, vertex_ai...
PROVIDER_PATTERN = r"^[a-z0-9][a-z0-9_\-]{0,49}$"

# Any JSON value, with a concrete type at every level of its schema (an array's items are JSON
# values again, by reference), so strict clients' validators accept the tool's output schema.
JsonValue = TypeAliasType(
    "JsonValue",
    "dict[str, Any] | list[JsonValue] | str | int | float | bool | None",
)


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str = Field(max_length=MAX_MESSAGE_CHARACTERS)


MAX_BOUND_TOOLS = 32
MAX_TOOL_ROUNDS = 10
MAX_TOOL_SECONDS = 300
# A tool or toolset name as MCP allows them (ASCII letters, digits, _ - .).
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.\-]{1,128}$"


class McpTools(BaseModel):
    """MCP tools of the caller's tenant the model may call: its built-in toolsets and upstreams,
    as far as the caller's token may call them. Each tool call runs through the same pipeline as a
    client's (scopes, rate limits, audit, metrics)."""

    model_config = ConfigDict(extra="forbid")

    tools: list[str] = Field(
        default_factory=list,
        max_length=MAX_BOUND_TOOLS,
        description="Tool names, as tools/list gives them (upstream tools with their prefix).",
    )
    toolsets: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="Whole toolsets (data_agent, workflows, upstreams...; one upstream as "
        "upstreams.<its name>): each of their tools the caller may call.",
    )
    max_rounds: int = Field(
        default=4, ge=1, le=MAX_TOOL_ROUNDS, description="Model calls at most; the last one answers."
    )
    time_limit_seconds: int = Field(
        default=120, ge=1, le=MAX_TOOL_SECONDS, description="For the whole conversation, tools included."
    )


class InvokeRequest(BaseModel):
    """One call to a language model."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "provider": "openai",
                    "model": "gpt-4o-mini",
                    "messages": [
                        {"role": "system", "content": "You answer in one sentence."},
                        {"role": "user", "content": "What is an MCP gateway?"},
                    ],
                    "temperature": 0,
                }
            ]
        },
    )

    provider: str = Field(
        pattern=PROVIDER_PATTERN,
        description="The provider, as litellm names it: openai, anthropic, deepseek, gemini, ollama...",
    )
    model: str = Field(
        min_length=1,
        max_length=200,
        description="The provider's model name (gpt-4o-mini), or the name of one of the tenant's "
        "configured models.",
    )
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    response_schema: dict[str, Any] | None = Field(
        default=None,
        description="A JSON Schema the output must match (the schema itself, not wrapped). An object "
        "root without additionalProperties gets additionalProperties: false.",
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="Provider options passed through (top_p, stop, seed, ...). For DeepSeek, "
        '{"json_mode": true} asks for JSON-only output.',
    )
    mcp: McpTools | None = Field(
        default=None,
        description="MCP tools the model may call; the answer lists the calls it made.",
    )


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ToolCallMade(BaseModel):
    """One tool call the model made, and how it went."""

    round: int
    name: str
    arguments: dict[str, Any]
    outcome: Literal["ok", "error", "refused"] = Field(
        description="ok; error (the tool failed, or its arguments were not valid); refused (not "
        "bound, or the pipeline refused it: scope, rate limit). The model was told either way."
    )
    message: str | None = None


class InvokeResponse(BaseModel):
    """The model's answer: ``output`` is parsed JSON when the text is JSON, else the text."""

    id: str = Field(description="This call's id; its usage record has the same one.")
    output: JsonValue
    usage: Usage
    provider: str
    model: str
    cost: float | None = Field(default=None, description="US dollars, as litellm prices the call.")
    tool_calls: list[ToolCallMade] | None = Field(
        default=None, description="With mcp: the tool calls the model made, in order."
    )
    finish_reason: Literal["answered", "max_rounds"] | None = Field(
        default=None,
        description="With mcp: answered, or max_rounds when the model still called tools at the last round.",
    )


class ProviderInfo(BaseModel):
    id: str
    json_mode: bool = Field(description="The provider can be asked for JSON-only output.")
    structured_output: bool = Field(description="The provider enforces a JSON Schema on its output.")
    available: bool = Field(description="This tenant can call it now (a key is stored or was given).")
    models: list[str] | None = Field(default=None, description="The tenant's configured models on it.")


class ProvidersResponse(BaseModel):
    providers: list[ProviderInfo]


class ErrorBody(BaseModel):
    code: str = Field(description="validation_error, unauthorized, budget_exceeded, provider_error...")
    message: str
    details: dict[str, Any] | None = None


class ErrorResponse(BaseModel):
    """Every error the API answers, whatever its status."""

    error: ErrorBody


class Health(BaseModel):
    status: Literal["ok"]
