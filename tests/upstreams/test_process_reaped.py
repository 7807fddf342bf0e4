"""A process whose main thread shows as a zombie may still hold its pipes open through its other
threads; the upstream failure tests wait for a killed stdio child to be reaped, not to be a zombie.

The e2e test of a stdio child killed between two calls once waited only for "Z": on a busy machine
its next call reached the child while the SDK's stdin thread was still being torn down, and failed
with "Connection closed" as a call to a child killed mid-call rightly does. Here the same state is
made on purpose, without timing: a child whose main thread ends with ``pthread_exit`` while a second
thread still reads its stdin."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

from tests.support.upstream_support import process_reaped

DEADLINE_SECONDS = 30
CHILD = """
import ctypes, sys, threading
threading.Thread(target=sys.stdin.buffer.read).start()
sys.stdout.write("ready\\n")
sys.stdout.flush()
ctypes.CDLL(None).pthread_exit(None)
"""


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _until(condition) -> None:
    give_up = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < give_up, "the child did not get there"
        time.sleep(0.01)


def test_a_zombie_main_thread_with_a_live_thread_still_holds_its_pipes_and_is_not_reaped():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline() == b"ready\n"
        _until(lambda: _state(child.pid) == "Z")
        poller = select.poll()
        poller.register(child.stdout.fileno(), select.POLLIN)

        assert poller.poll(0) == [], "the stdout pipe is still open: no end of file, no hang-up"
        assert not process_reaped(child.pid)

        child.stdin.close()
        assert child.wait(timeout=DEADLINE_SECONDS) == 0
        assert child.stdout.read() == b""
        assert process_reaped(child.pid)
    finally:
        child.kill()
        child.wait()
