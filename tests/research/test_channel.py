"""A decision's channel in the job's history: ``stdio`` from a local stdio session, ``mcp`` from an
MCP client (docs/research-pages.md lists both). Shown failing before: stdio decisions said ``mcp``."""

from __future__ import annotations

from dataclasses import replace

from core.identity import STDIO_CLIENT_ID
from research.tools import _channel
from tests.support.identities import identity_without_rows

CLIENT = identity_without_rows(scopes=frozenset({"mcp:write"}), application_id=3, client_id="abc", token_id=9)


def test_a_stdio_session_decides_on_the_stdio_channel():
    stdio = replace(
        CLIENT, application_id=0, client_id=STDIO_CLIENT_ID, client_name="Local stdio", token_id=0
    )
    assert _channel(stdio) == "stdio"


def test_an_mcp_client_decides_on_the_mcp_channel_even_if_its_client_id_says_stdio():
    assert _channel(CLIENT) == "mcp"
    # A registered client may choose any client id; a token makes it an MCP client all the same.
    assert _channel(replace(CLIENT, client_id=STDIO_CLIENT_ID)) == "mcp"
