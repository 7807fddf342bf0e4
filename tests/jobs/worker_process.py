"""A ``manage.py jobs_worker`` process for end-to-end tests, with the same environment (database,
keys, settings) as the Daphne server whose jobs it runs."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings


class JobsWorkerProcess:
    def __init__(
        self,
        *,
        env: dict[str, str],
        log_path: Path,
        worker_id: str,
        extra_env: dict[str, str] | None = None,
        queue: str = "default",
    ) -> None:
        self.env = {**env, **(extra_env or {})}
        self.queue = queue
        self.log_path = log_path
        self.worker_id = worker_id
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "jobs_worker",
                "--interval",
                "0.1",
                "--no-startup-delay",
                "--queue-name",
                self.queue,
                "--worker-id",
                self.worker_id,
                "-v",
                "2",
            ],
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"The jobs worker exited early:\n{self.log()}")
            if "Starting worker" in self.log():
                return
            time.sleep(0.1)
        raise RuntimeError(f"The jobs worker did not start:\n{self.log()}")

    def kill(self) -> None:
        """Die the hard way (SIGKILL), as an OOM-killed or lost machine would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Not within {timeout:.0f} s: {what}")
        time.sleep(0.2)
