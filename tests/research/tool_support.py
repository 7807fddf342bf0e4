"""Calling the research tools in this process, through the SDK server Gatehouse builds
(``mcp_gateway.pipeline.server.server_build``): its argument validation, the guarded handler (time limit,
error translation) and its result conversion against the output schema, as for a client's call.

The request the tools read their caller from carries an ``Identity`` in its ASGI scope, as
``transport.auth`` leaves it; progress notifications land in a list. Job steps run in a thread of this
process (``StepsPump``, the worker's own loop through ``tests.jobs.support.steps_run``), so a tool's
bounded wait sees them happen. The request middleware (scopes, toolsets, audit) is not in this path:
the end-to-end tests cover it over HTTP.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from jsonschema import Draft202012Validator
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult

from core.identity import Identity
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.scope_keys import IDENTITY_KEY
from mcp_gateway.pipeline.server import server_build
from research.models import LibraryPaper
from research.records import title_normalize
from tests.jobs.support import steps_run


@functools.cache
def tool_server() -> MCPServer:
    return server_build(registry=default_registry())


_validators: dict[str, Draft202012Validator] = {}


async def output_validator(name: str) -> Draft202012Validator:
    if not _validators:
        for listed in await tool_server().list_tools():
            if listed.output_schema is not None:
                _validators[listed.name] = Draft202012Validator(listed.output_schema)
    return _validators[name]


@dataclass
class _Request:
    scope: dict[str, Any]


@dataclass
class _Session:
    progress: list[tuple[float, str | None]] = field(default_factory=list)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self.progress.append((progress, message))


@dataclass
class _RequestContext:
    request: _Request
    session: _Session


@dataclass
class Call:
    result: CallToolResult
    progress: list[tuple[float, str | None]]

    @property
    def structured(self) -> dict[str, Any]:
        return dict(self.result.structured_content or {})

    @property
    def is_error(self) -> bool:
        return bool(self.result.is_error)


async def tool_call(identity: Identity, name: str, **arguments: Any) -> Call:
    """Call the tool ``name`` as ``identity``; a successful result is checked against the output
    schema the tool publishes, as a client's validator would."""
    session = _Session()
    request_context = _RequestContext(request=_Request(scope={IDENTITY_KEY: identity}), session=session)
    ctx: Context[Any, Any] = Context(request_context=request_context, mcp_server=tool_server())  # type: ignore[arg-type]
    result = await tool_server().call_tool(name, arguments, context=ctx)
    assert isinstance(result, CallToolResult)
    if not result.is_error:
        (await output_validator(name)).validate(result.structured_content)
    return Call(result=result, progress=session.progress)


class StepsPump:
    """Runs every ready job step, over and over, in a thread of its own until stopped."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steps-pump", daemon=True)
        self.failure: BaseException | None = None

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                steps_run()
                self._stop.wait(0.02)
        except BaseException as error:  # reported by stop()
            self.failure = error
        finally:
            connection.close()

    def __enter__(self) -> StepsPump:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.failure is not None:
            raise self.failure


LIBRARY = (
    ("Attention is all you need", ["Ashish Vaswani", "Noam Shazeer"], 2017, "10.5555/attention"),
    ("Deep residual learning for image recognition", ["Kaiming He"], 2016, "10.1109/cvpr.2016.90"),
    ("BERT: pre-training of deep bidirectional transformers", ["Jacob Devlin"], 2019, "10.18653/v1/n19-1423"),
    ("Learning transferable visual models from natural language supervision", ["Alec Radford"], 2021, ""),
)


def library_fill(*, tenant: Any) -> list[LibraryPaper]:
    return [
        LibraryPaper.objects.create(
            tenant=tenant,
            title=title,
            title_key=title_normalize(title),
            authors=authors,
            year=year,
            doi=doi,
            venue="Proceedings",
            abstract=f"An abstract about {title.lower()} and learning.",
        )
        for title, authors, year, doi in LIBRARY
    ]
