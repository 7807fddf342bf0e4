"""`make run` in a clone of the committed HEAD, as a newcomer runs it: their shell's environment and
nothing of the test run's (no DATABASE_URL, SECRET_KEY, Redis or rate-limit overrides), each run in
a process group of its own so that nothing it started outlives the test."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

BASE_DIR = Path(__file__).resolve().parents[2]

# What a fresh shell has: the system's own variables, the Python toolchain's (pyenv's shims, pip's
# index and wheel folders) and proxies. Everything else, Gatehouse's settings first, stays out.
_NEWCOMER_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TMPDIR",
        "TZ",
        "CI",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)
_NEWCOMER_PREFIXES = ("LC_", "PIP_", "PYENV", "XDG_")

# The banner's password: the `  Password:` line, or before it bootstrap_demo's own line.
_PASSWORD_LINE = re.compile(r"^  Password:\s*(\S+)", re.MULTILINE)
_GENERATED_PASSWORD_LINE = re.compile(r"^Generated password for [^:\n]+: (\S+)\s*$", re.MULTILINE)


def newcomer_env(**extra: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name in _NEWCOMER_NAMES or name.startswith(_NEWCOMER_PREFIXES)
    }
    return {**env, **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def clone_head(*, into: Path) -> str:
    """Clone the repository the tests run from into ``into``, at its committed HEAD (in CI, main).
    Work not yet committed is not in the clone, as it would not be in anyone else's."""
    head = git("rev-parse", "HEAD", cwd=BASE_DIR)
    git("clone", "--quiet", str(BASE_DIR), str(into), cwd=BASE_DIR.parent)
    git("checkout", "--quiet", "--detach", head, cwd=into)
    return head


def banner_password(output: str) -> str | None:
    match = _PASSWORD_LINE.search(output) or _GENERATED_PASSWORD_LINE.search(output)
    return match.group(1) if match else None


def own_lines(output: str) -> list[str]:
    """The output's lines without make's own (`make: *** [...] Error 1`, directory notes)."""
    return [line for line in output.splitlines() if line.strip() and not re.match(r"^make(\[\d+\])?: ", line)]


@dataclass
class FileStamp:
    """Enough of a file's identity to tell kept from made anew (or touched)."""

    inode: int
    mtime_ns: int
    size: int

    @classmethod
    def of(cls, path: Path) -> FileStamp | None:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        return cls(inode=stat.st_ino, mtime_ns=stat.st_mtime_ns, size=stat.st_size)


@dataclass
class MakeRun:
    """One `make run` in the clone, its output (stdout and stderr together) in ``log_path``."""

    directory: Path
    port: int
    log_path: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    stopped_by: str = ""
    figures: dict[str, float] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            self.started = time.monotonic()
            # A session of its own: make, the shell of its recipe and Daphne form one process
            # group that a signal reaches whole.
            self.process = subprocess.Popen(
                ["make", "run"],
                cwd=self.directory,
                env={**self.env, "PORT": str(self.port)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_exit(self, *, timeout: float) -> int:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            self.figures["exit_seconds"] = time.monotonic() - self.started
        return code

    def wait_healthy(self, *, timeout: float, watch: Path | None = None) -> float:
        """Seconds from start to `/health` answering 200; ``watch``: also note when it appears."""
        assert self.process is not None
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            if watch is not None and "watched_seconds" not in self.figures and watch.exists():
                self.figures["watched_seconds"] = time.monotonic() - self.started
            if self.process.poll() is not None:
                raise AssertionError(f"make run exited ({self.process.returncode}):\n{self.output()[-8000:]}")
            try:
                if httpx.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    self.figures["healthy_seconds"] = time.monotonic() - self.started
                    return self.figures["healthy_seconds"]
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise AssertionError(f"/health did not answer within {timeout:.0f} s:\n{self.output()[-8000:]}")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Ctrl-C first, as a person stops it; SIGTERM if SIGINT is ignored (a shell's background
        job inherits it ignored, and Twisted honours that); SIGKILL last. Always the whole group."""
        if self.process is None:
            return
        pgid = self.process.pid
        for sig, grace in ((signal.SIGINT, 15), (signal.SIGTERM, 15), (signal.SIGKILL, 15)):
            if self.process.poll() is not None:
                break
            _signal_group(pgid, sig)
            try:
                self.process.wait(timeout=grace)
                self.stopped_by = sig.name
            except subprocess.TimeoutExpired:
                continue
        # make may be gone while Daphne, its child, is still in the group.
        _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
