"""The servers the MCP benchmarks compare, each started on loopback in a process of its own.

- The bare SDK (``bare_server.py``: ``MCPServer`` with the same trivial tool, no auth) under uvicorn,
  the baseline every ratio is against, and under Daphne.
- Gatehouse as ``make run`` ships it: auditing on, its access log and log level at their defaults,
  persisted sessions, on PostgreSQL, with ``REDIS_URL`` set and a per-user tool rate limit counted
  in Redis for every call (through leases) but set too high ever to refuse. Under Daphne as
  ``make run`` starts it (``-v 0``), under uvicorn (its own access log off, as Daphne's is) and
  under granian (when installed: ``pip install -e ".[bench]"``).

Each server's output goes to a temporary file, where Gatehouse's SQL statement count
(``GATEHOUSE_COUNT_QUERIES``) is found once it has stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import re
import secrets
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from bench_support import BASE_DIR, PYTHON, free_port, prepare_database, wait_for
from mcp_load import answering

GATEHOUSE = "config.asgi:application"


def command(kind: str, app: str, port: int) -> list[str]:
    """How ``kind`` (daphne, uvicorn, granian) serves ``app`` (``gatehouse`` or ``bare``)."""
    if app == "bare" and kind == "uvicorn":
        return [PYTHON, str(BASE_DIR / "benchmarks" / "bare_server.py"), str(port)]
    target = GATEHOUSE if app == "gatehouse" else "benchmarks.bare_server:application"
    if kind == "daphne":
        # make run's flags: Daphne's own access log off (Gatehouse writes its own).
        return [PYTHON, "-m", "daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(port), target]
    if kind == "uvicorn":
        host = ["--host", "127.0.0.1", "--port", str(port)]
        return [PYTHON, "-m", "uvicorn", "--no-access-log", *host, target]
    if kind == "granian":
        host = ["--host", "127.0.0.1", "--port", str(port)]
        return [PYTHON, "-m", "granian", "--interface", "asgi", "--workers", "1", *host, target]
    raise ValueError(kind)


def granian_installed() -> bool:
    return importlib.util.find_spec("granian") is not None


def event_loop_note() -> str:
    """What uvicorn and granian run on here: uvloop and httptools when installed (``[bench]``)."""
    found = [name for name in ("uvloop", "httptools") if importlib.util.find_spec(name)]
    return " and ".join(found) if found else "asyncio and h11 (no uvloop or httptools installed)"


def shipped_env(*, database_url: str, public: str, **overrides: str) -> dict[str, str]:
    """Gatehouse's environment as ``make run`` would have it, plus what the benchmark needs: its
    database, Redis for the rate limits (a limit never reached, so every call pays the check), a
    fixed secret and public URL, and the SQL statement counter. Nothing else is switched off."""
    env = {key: value for key, value in os.environ.items() if key not in _SHIPPED_DEFAULTS}
    return {
        **env,
        "DATABASE_URL": database_url,
        "SECRET_KEY": "benchmark-only-secret-key",
        "PUBLIC_URL": public,
        "DEMO_PASSWORD": "benchmark-password",
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "RATE_LIMIT_TOOL": "100000000/minute",
        # Every simulated client is the same person: a session each.
        "MCP_SESSIONS_PER_PERSON": "1000000",
        "RATE_LIMIT_KEY_PREFIX": "gatehouse-bench-" + secrets.token_hex(4),
        "GATEHOUSE_COUNT_QUERIES": "true",
        **overrides,
    }


# Settings the benchmark's own environment might carry that would change what "as shipped" means.
_SHIPPED_DEFAULTS = {
    "GATEHOUSE_AUDIT",
    "ACCESS_LOG",
    "LOG_LEVEL",
    "DEBUG",
    "RATE_LIMIT_STORAGE_URL",
    "MCP_SESSION_PURGE_INTERVAL_SECONDS",
}


def token_mint(env: dict[str, str], *, resource: str) -> str:
    """An hour's access token for alice in acme for ``resource``, minted in ``env``'s database by
    a Django process of its own (the benchmark may use two databases), with the conformance toolset
    (``test_simple_text``) on for acme."""
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); import django; django.setup()\n"
        "from accounts.models import Tenant\n"
        "from mcp_gateway.models import TenantToolset\n"
        "from bench_support import access_token_for_alice\n"
        "acme = Tenant.objects.get(slug='acme')\n"
        "TenantToolset.objects.update_or_create(\n"
        "    tenant=acme, toolset='conformance', defaults={'enabled': True}\n"
        ")\n"
        f"print(access_token_for_alice(scope='mcp:read mcp:write', resource={resource!r}))\n"
    )
    quiet = {key: value for key, value in env.items() if key != "GATEHOUSE_COUNT_QUERIES"}
    done = subprocess.run(
        [PYTHON, "-c", code],
        cwd=BASE_DIR,
        env={**quiet, "DJANGO_SETTINGS_MODULE": "config.settings", "LOG_LEVEL": "WARNING"},
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip().splitlines()[-1]


def database_ready(env: dict[str, str]) -> None:
    """Migrated, the demo in place, and the sessions and audit rows of earlier runs gone (the
    large database keeps its seeded rows: ``large_db``)."""
    prepare_database(env)
    import psycopg

    with psycopg.connect(env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("DELETE FROM mcp_gateway_mcpsession WHERE client_name <> 'bench-seed'")
        conn.execute("DELETE FROM mcp_gateway_auditevent WHERE request_id <> 'bench-seed'")
        conn.execute("VACUUM ANALYZE mcp_gateway_mcpsession, mcp_gateway_auditevent")


@dataclass
class Server:
    """One server of the comparison: its label, how it runs, and (for Gatehouse) its database."""

    label: str
    kind: str
    app: str
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    token: str | None = None
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        # Open as long as the server runs, and read after it stops.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115
        self.process = subprocess.Popen(
            command(self.kind, self.app, self.port),
            cwd=BASE_DIR,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self) -> None:
        """Listening, and answering an authenticated call."""
        assert self.process is not None
        try:
            wait_for(self.port, self.process)
            asyncio.run(answering(self.url, self.token))
        except RuntimeError:
            raise RuntimeError(f"{self.label}: {self.output()[-3000:]}") from None

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far, its child processes (granian's worker) included."""
        if self.process is None:
            return 0.0
        return sum(_cpu_seconds(pid) for pid in _process_tree(self.process.pid))

    def stop(self) -> int | None:
        """Stop it; the SQL statements it ran, when it counted them."""
        if self.process is None:
            return None
        # SIGINT, not SIGTERM: uvicorn re-raises a SIGTERM it handled once it has shut down, which
        # ends the process before its exit handlers run, and with them the SQL count.
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        counts = re.findall(r"gatehouse-sql-queries: (\d+)", self.output())
        # granian's worker and its parent each report; the parent ran none.
        return sum(int(count) for count in counts) if counts else None

    def output(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")


def _process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc (Linux)."""
    tree, index = [pid], 0
    while index < len(tree):
        children = Path(f"/proc/{tree[index]}/task/{tree[index]}/children")
        with contextlib.suppress(OSError):
            tree.extend(int(child) for child in children.read_text().split())
        index += 1
    return tree


def _cpu_seconds(pid: int) -> float:
    """User and system time of one process (its threads included), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # utime and stime, the 14th and 15th fields of stat(5), the 12th and 13th after the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
