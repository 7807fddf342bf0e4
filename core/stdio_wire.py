"""The process's stdout kept for protocol alone, for a server that speaks MCP over stdio.

A desktop client reads every line of a local server's stdout as JSON-RPC, so one stray line (a
library's notice at import, a system check's warning, a print in a tool) breaks its session. The
SDK's stdio transport diverts file descriptor 1 only while it serves; this does it from the start
of the process, before Django and the apps are imported: fd 1 (and so ``sys.stdout``) then goes to
stderr, and only the stream returned here reaches the client. Imports nothing of Django, so an
entry point can call it first.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

_wire: BinaryIO | None = None


def stdout_reserve() -> BinaryIO:
    """The real stdout, for protocol only; from now on anything else written to fd 1 lands on
    stderr. Safe to call again: it returns the same stream."""
    global _wire
    if _wire is None:
        sys.stdout.flush()
        # os.dup's copy is not inherited: a child process cannot write to the client either.
        private = os.dup(1)
        os.dup2(2, 1)
        _wire = os.fdopen(private, "wb")
    return _wire
