"""Upstream MCP servers for the end-to-end tests of forwarding: ``tests/support/upstream_server.py`` over
Streamable HTTP and SSE (one process each per test module) and over stdio (a child Gatehouse's
server process starts itself), and the fields of a row that points Gatehouse at each."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.upstream_support import UpstreamProcess, stdio_command

TRANSPORTS = ["http", "sse", "stdio"]


@pytest.fixture(scope="module")
def upstream_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("upstreams"))


@pytest.fixture(scope="module")
def http_upstream(upstream_dir: Path) -> Iterator[UpstreamProcess]:
    process = UpstreamProcess("http", workdir=upstream_dir).start()
    yield process
    process.kill()


@pytest.fixture(scope="module")
def sse_upstream(upstream_dir: Path) -> Iterator[UpstreamProcess]:
    process = UpstreamProcess("sse", workdir=upstream_dir).start()
    yield process
    process.kill()


# The test server is written for the handshake's session (its tools elicit, sample and announce
# list changes in the middle of a call), so it is reached that way unless a test says otherwise.
HANDSHAKE = "handshake"


def stdio_fields(*, record: Path | None = None) -> dict[str, Any]:
    """A row's fields for the test server over stdio; with ``record``, it writes what reached it there."""
    command, args = stdio_command()
    return {
        "transport": "stdio",
        "protocol": HANDSHAKE,
        "command": command,
        "args": [*args, *(["--record", str(record)] if record is not None else [])],
    }


def remote_fields(process: UpstreamProcess) -> dict[str, Any]:
    return {"transport": process.transport, "protocol": HANDSHAKE, "url": process.url}


@dataclass(frozen=True)
class UpstreamUnderTest:
    """The test server on one transport: a row's fields, and the file it records what reached it in."""

    fields: dict[str, Any]
    record_path: Path

    def records(self) -> list[dict[str, Any]]:
        if not self.record_path.exists():
            return []
        return [json.loads(line) for line in self.record_path.read_text().splitlines() if line.strip()]


@pytest.fixture(params=TRANSPORTS)
def upstream(request: pytest.FixtureRequest, upstream_dir: Path) -> UpstreamUnderTest:
    """The test server on each transport in turn (its process started on first use)."""
    if request.param == "stdio":
        record_path = upstream_dir / "stdio.jsonl"
        return UpstreamUnderTest(stdio_fields(record=record_path), record_path)
    process: UpstreamProcess = request.getfixturevalue(f"{request.param}_upstream")
    return UpstreamUnderTest(remote_fields(process), process.record_path)


@pytest.fixture
def upstream_fields(upstream: UpstreamUnderTest) -> dict[str, Any]:
    return upstream.fields
