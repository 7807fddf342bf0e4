"""Upstream MCP servers for the tests: ``tests/support/upstream_server.py`` in a process of its own, and
rows that point Gatehouse at it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from accounts.models import Tenant
from tests.e2e.harness import listening_socket, serving_wait
from upstreams.models import Upstream

SERVER_SCRIPT = str(Path(settings.BASE_DIR) / "tests" / "support" / "upstream_server.py")


class UpstreamProcess:
    """``tests/support/upstream_server.py`` over http or sse on a socket bound for it here (on
    ``port``, to start one again where a killed one was); its record file says what reached it."""

    def __init__(
        self, transport: str, *, workdir: Path, port: int | None = None, options: tuple[str, ...] = ()
    ) -> None:
        self.transport = transport
        # More of the server's command-line options (``--oauth ID:SECRET``, ``--token-seconds N``).
        self.options = options
        self._listener: socket.socket | None = listening_socket(port or 0)
        self.port = int(self._listener.getsockname()[1])
        self.record_path = workdir / f"upstream-{transport}-{self.port}.jsonl"
        self.log_path = workdir / f"upstream-{transport}-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'sse' if self.transport == 'sse' else 'mcp'}"

    def start(self) -> UpstreamProcess:
        assert self._listener is not None, "an UpstreamProcess starts once; make another on its port"
        fd = self._listener.fileno()
        try:
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    [
                        sys.executable,
                        SERVER_SCRIPT,
                        self.transport,
                        str(self.port),
                        "--fd",
                        str(fd),
                        "--record",
                        str(self.record_path),
                        *self.options,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(fd,),
                )
        finally:
            # The server's copy is the only one: once it is killed, its port refuses connections.
            self._listener_close()
        serving_wait(
            self.process,
            f"http://127.0.0.1:{self.port}/",
            name="The upstream",
            log=lambda: self.log_path.read_text(errors="replace"),
            timeout=30,
        )
        return self

    def _listener_close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def kill(self) -> None:
        self._listener_close()
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
