"""The conformance suites are installed before the tests run (``make conformance-tools``, a
prerequisite of ``make test`` and ``make pytest``), never inside a test: an install there would
spend the test's time limit on npm. A machine without them fails these tests with that command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# What the Makefile installs, and where (CONFORMANCE_HOME, CONFORMANCE_02_HOME and their versions).
SUITES = {
    Path(os.environ.get("MCP_TOOLS_HOME", Path.home() / ".cache" / "mcp-tools")): "0.1.16",
    Path(os.environ.get("MCP_TOOLS_02_HOME", Path.home() / ".cache" / "mcp-tools-0.2")): "0.2.0-alpha.12",
}


@pytest.fixture(autouse=True, scope="session")
def conformance_suites_installed() -> None:
    missing = [
        f"{home} ({version})"
        for home, version in SUITES.items()
        if not (home / f".installed-{version}").exists()
    ]
    if missing:
        pytest.fail(
            f"The conformance suites are not installed: {', '.join(missing)}. Run `make conformance-tools`.",
            pytrace=False,
        )
