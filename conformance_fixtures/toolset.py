"""The fixtures the official MCP conformance suite calls (``test_simple_text``, ``test://static-text``,
...), so the suite can be run against Gatehouse with authentication on. Off unless a tenant enables it
(``manage.py toolsets enable TENANT conformance``). Texts and payloads follow the suite's reference
server."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import (
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    ContentBlock,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

from accounts.scopes import SCOPE_READ
from conformance_fixtures import headers as conformance_headers
from conformance_fixtures import mrtr as conformance_mrtr
from conformance_fixtures import stateless as conformance_stateless
from conformance_fixtures import tasks as conformance_tasks
from mcp_gateway.kernel.registry import Toolset, resource_prefix, tool
from mcp_gateway.pipeline.client_log import client_log
from mcp_gateway.pipeline.client_requests import client_elicit, client_sample

# The 2026-07-28 requirement set's fixtures, one module per group of scenarios.
_PARTS = (conformance_stateless, conformance_mrtr, conformance_headers, conformance_tasks)

PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV_EMPTY = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


def _fixture(name: str, description: str) -> Any:
    return tool(name=name, description=description, scopes=[SCOPE_READ], structured=False)


@_fixture("test_simple_text", "Returns a simple text response.")
async def test_simple_text() -> list[ContentBlock]:
    return [TextContent(type="text", text="This is a simple text response for testing.")]


@_fixture("test_image_content", "Returns a 1x1 PNG image.")
async def test_image_content() -> list[ContentBlock]:
    return [ImageContent(type="image", data=PNG_1X1, mime_type="image/png")]


@_fixture("test_audio_content", "Returns a tiny WAV file.")
async def test_audio_content() -> list[ContentBlock]:
    return [AudioContent(type="audio", data=WAV_EMPTY, mime_type="audio/wav")]


@_fixture("test_embedded_resource", "Returns an embedded text resource.")
async def test_embedded_resource() -> list[ContentBlock]:
    resource = TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return [EmbeddedResource(type="resource", resource=resource)]


@_fixture("test_multiple_content_types", "Returns text, an image and an embedded resource.")
async def test_multiple_content_types() -> list[ContentBlock]:
    resource = TextResourceContents(
        uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
    )
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=resource),
    ]


@_fixture("test_tool_with_logging", "Sends three log messages while it runs.")
async def test_tool_with_logging(ctx: Context) -> list[ContentBlock]:
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await client_log(ctx, "info", text)
        await asyncio.sleep(0.05)
    return [TextContent(type="text", text="Tool with logging executed successfully")]


@_fixture("test_tool_with_progress", "Reports progress three times while it runs.")
async def test_tool_with_progress(ctx: Context) -> list[ContentBlock]:
    for progress in (0, 50, 100):
        await ctx.report_progress(progress, 100, f"Completed step {progress} of 100")
        await asyncio.sleep(0.05)
    token = (ctx.request_context.meta or {}).get("progress_token")
    return [TextContent(type="text", text=str(token))]


@_fixture("test_error_handling", "Always fails, as a tool result the model can read.")
async def test_error_handling() -> list[ContentBlock]:
    raise ToolError("This tool intentionally returns an error for testing")


@_fixture("test_sampling", "Asks the client's model to complete a prompt.")
async def test_sampling(prompt: str, ctx: Context) -> list[ContentBlock]:
    answer = await client_sample(ctx, prompt=prompt, max_tokens=100)
    return [TextContent(type="text", text=f"LLM response: {answer}")]


@_fixture("test_elicitation", "Asks the person for information.")
async def test_elicitation(message: str, ctx: Context) -> list[ContentBlock]:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = await client_elicit(ctx, message=message, schema=schema)
    return [TextContent(type="text", text=f"User response: action={answer.action}, content={answer.content}")]


@_fixture("test_elicitation_sep1034_defaults", "Asks for a form whose every field has a default (SEP-1034).")
async def test_elicitation_sep1034_defaults(ctx: Context) -> list[ContentBlock]:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    answer = await client_elicit(
        ctx, message="Please review and update the form fields with defaults", schema=schema
    )
    return [_elicitation_completed(answer)]


@_fixture("test_elicitation_sep1330_enums", "Asks for a form with every kind of enum (SEP-1330).")
async def test_elicitation_sep1330_enums(ctx: Context) -> list[ContentBlock]:
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        "required": [],
    }
    answer = await client_elicit(ctx, message="Please select options from the enum fields", schema=schema)
    return [_elicitation_completed(answer)]


def _elicitation_completed(answer: ElicitResult) -> TextContent:
    return TextContent(
        type="text",
        text=f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}",
    )


def install(server: MCPServer) -> None:
    """Resources, a resource template, prompts, completions and subscriptions for the suite."""

    @server.resource(
        "test://static-text", name="static-text", mime_type="text/plain", description="Static text"
    )
    async def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource(
        "test://static-binary", name="static-binary", mime_type="image/png", description="A 1x1 PNG image"
    )
    async def static_binary() -> bytes:
        return base64.b64decode(PNG_1X1)

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        mime_type="text/plain",
        description="Can be watched",
    )
    async def watched_resource() -> str:
        return "Watched resource content."

    @server.resource(
        "test://template/{id}/data", name="template", mime_type="application/json", description="Data by id"
    )
    async def template_data(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.prompt(name="test_simple_prompt", description="A simple prompt without arguments")
    async def simple_prompt() -> list[Message]:
        return [UserMessage("This is a simple prompt for testing.")]

    @server.prompt(name="test_prompt_with_arguments", description="A prompt with required arguments")
    async def prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
        return [UserMessage(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")]

    @server.prompt(
        name="test_prompt_with_embedded_resource", description="A prompt that includes an embedded resource"
    )
    async def prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
        resource = TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(EmbeddedResource(type="resource", resource=resource)),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt(name="test_prompt_with_image", description="A prompt that includes image content")
    async def prompt_with_image() -> list[Message]:
        return [
            UserMessage(ImageContent(type="image", data=PNG_1X1, mime_type="image/png")),
            UserMessage("Please analyze the image above."),
        ]

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        return Completion(values=[], total=0, has_more=False)

    # resources/subscribe and unsubscribe are the endpoint's own (``resource_subscriptions``).
    for part in _PARTS:
        part.install(server)


toolset = Toolset(
    name="conformance",
    description="Fixtures for the official MCP conformance suite. For testing deployments; off by default.",
    tools=(
        test_simple_text,
        test_image_content,
        test_audio_content,
        test_embedded_resource,
        test_multiple_content_types,
        test_tool_with_logging,
        test_tool_with_progress,
        test_error_handling,
        test_sampling,
        test_elicitation,
        test_elicitation_sep1034_defaults,
        test_elicitation_sep1330_enums,
        *(spec for part in _PARTS for spec in part.TOOLS),
    ),
    enabled_by_default=False,
    install=install,
    resources=(resource_prefix(uri="test://"),),
    prompts=(
        "test_simple_prompt",
        "test_prompt_with_arguments",
        "test_prompt_with_embedded_resource",
        "test_prompt_with_image",
        *(name for part in _PARTS for name in part.PROMPTS),
    ),
)
