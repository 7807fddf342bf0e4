"""Upstream MCP servers for the tests: ``tests/support/upstream_server.py`` in a process of its own, and
rows that point Gatehouse at it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings

from accounts.models import Tenant
from tests.e2e.harness import free_port
from upstreams.models import Upstream

SERVER_SCRIPT = str(Path(settings.BASE_DIR) / "tests" / "support" / "upstream_server.py")


class UpstreamProcess:
    """``tests/support/upstream_server.py`` over http or sse on a free port; its record file says what
    reached it."""

    def __init__(
        self, transport: str, *, workdir: Path, port: int | None = None, options: tuple[str, ...] = ()
    ) -> None:
        self.transport = transport
        # More of the server's command-line options (``--oauth ID:SECRET``, ``--token-seconds N``).
        self.options = options
        self.port = port or free_port()
        self.record_path = workdir / f"upstream-{transport}-{self.port}.jsonl"
        self.log_path = workdir / f"upstream-{transport}-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'sse' if self.transport == 'sse' else 'mcp'}"

    def start(self) -> UpstreamProcess:
        self.process = subprocess.Popen(
            [
                sys.executable,
                SERVER_SCRIPT,
                self.transport,
                str(self.port),
                "--record",
                str(self.record_path),
                *self.options,
            ],
            stdout=self.log_path.open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"The upstream exited early:\n{self.log_path.read_text()}")
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1)
                return self
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("The upstream did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def records(self) -> list[dict[str, Any]]:
        if not self.record_path.exists():
            return []
        return [json.loads(line) for line in self.record_path.read_text().splitlines() if line.strip()]


def stdio_command() -> tuple[str, list[str]]:
    return sys.executable, [SERVER_SCRIPT, "stdio"]


def process_reaped(pid: int) -> bool:
    """Whether ``pid`` has ended and its parent has collected it: only then are all its threads gone
    and its pipes closed. A zombie (``ps`` says Z) is not enough: the test server over stdio reads
    its stdin in a second thread, and after a SIGKILL its main thread can show Z while that thread is
    still being torn down, holding the pipes open for some milliseconds more (on a busy machine), so
    a call sent then reaches a process that is still there and dies under it."""
    return not Path(f"/proc/{pid}").exists()


def upstream_row(*, tenant: str, name: str, **fields: Any) -> Upstream:
    """An upstream row as the admin would save it, without the save-time test (the tests that
    need the test call the service)."""
    return Upstream.objects.create(tenant=Tenant.objects.get(slug=tenant), name=name, **fields)
