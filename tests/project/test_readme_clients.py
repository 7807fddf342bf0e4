"""The README's "Connect a client" configurations are pasted as they stand: each JSON block must be
JSON, and every MCP address in the README must be the one the server announces by default (what
``make run`` prints, the home page shows and ``mcp_token`` binds tokens to)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from tests.support.docs_support import README, ROOT, fenced_blocks

# A running Gatehouse's address (loopback, as make run serves it); documentation links ending in
# /mcp (a client's own docs page) are not server addresses.
_MCP_ADDRESS = re.compile(r"https?://(?:127\.0\.0\.1|localhost|\[::1\])(?::\d+)?/mcp\b")


@cache
def _default_mcp_url() -> str:
    """The server's MCP URL with no PORT or PUBLIC_URL set, read from the settings themselves in a
    process of its own (this one's settings may have been started with other values)."""
    env = {key: value for key, value in os.environ.items() if key not in {"PORT", "PUBLIC_URL"}}
    env.setdefault("SECRET_KEY", "docs-test-only-secret")
    done = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.MCP_RESOURCE_URL)"],
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


_JSON_BLOCKS = fenced_blocks(README.read_text(), lang="json")


def test_the_default_mcp_url_is_the_loopback_one_make_run_prints():
    assert _default_mcp_url() == "http://127.0.0.1:8000/mcp"


def test_the_readme_has_a_json_configuration_per_client():
    # Cursor, VS Code and Claude Desktop; guards the test below against passing on nothing.
    assert len(_JSON_BLOCKS) >= 3


@pytest.mark.parametrize("block", _JSON_BLOCKS, ids=[f"json-block-{n}" for n in range(len(_JSON_BLOCKS))])
def test_each_json_configuration_parses_and_points_at_the_mcp_url(block: str):
    config = json.loads(block)

    urls = [text for text in _strings(config) if text.startswith(("http://", "https://"))]

    assert urls, f"a client configuration with no server address:\n{block}"
    assert set(urls) == {_default_mcp_url()}, block


def test_every_mcp_address_in_the_readme_is_the_default_one():
    addresses = set(_MCP_ADDRESS.findall(README.read_text()))

    assert addresses == {_default_mcp_url()}
