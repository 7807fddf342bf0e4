"""A command that asks at a terminal (Django's changepassword reads with getpass), given one.

The child gets a pseudo-terminal as its standard input and output, in a session of its own: with
no controlling terminal, getpass reads the terminal it was given on standard input (echo off),
never the developer's own. Each answer is typed only once its prompt has appeared, since getpass
flushes whatever was typed before it turned echo off.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path


def run_with_tty(
    args: list[str], *, cwd: Path, env: dict[str, str], dialogue: list[tuple[str, str]], timeout: float
) -> tuple[int, str]:
    """Run ``args``; for each (prompt, answer) in turn, type the answer once the prompt has appeared
    after the previous one. Returns (exit code, transcript)."""
    controller, terminal = os.openpty()
    try:
        process = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            start_new_session=True,
        )
    finally:
        os.close(terminal)
    transcript = b""
    typed = 0
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(controller, 4096)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if not chunk and process.poll() is not None:
                    break
                transcript += chunk
            elif process.poll() is not None:
                break
            if typed < len(dialogue):
                prompt, answer = dialogue[typed]
                found = transcript.find(prompt.encode(), seen)
                if found >= 0:
                    os.write(controller, answer.encode() + b"\n")
                    seen = found + len(prompt.encode())
                    typed += 1
        else:
            raise AssertionError(
                f"{args} did not finish in {timeout:.0f} s:\n{transcript.decode(errors='replace')}"
            )
        return process.wait(timeout=10), transcript.decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(controller)
