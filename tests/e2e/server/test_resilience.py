"""The endpoint recovers by itself when its database connections are cut."""

from __future__ import annotations

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from tests.e2e.conftest import SERVER_DB_APPLICATION
from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_token
from tests.e2e.raw_mcp import MCP_HEADERS, initialize_body

pytestmark = pytest.mark.django_db


def _terminate_server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            [SERVER_DB_APPLICATION],
        )
        (killed,) = cursor.fetchone()
    return int(killed)


async def test_the_endpoint_reconnects_after_its_database_connections_are_killed(server, committed):
    token = minted_token(committed, server, Person("alice"))
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.post(server.mcp_url, json=initialize_body(), headers=headers)).status_code == 200

        killed = await sync_to_async(_terminate_server_connections)()
        assert killed >= 1

        after = await http.post(server.mcp_url, json=initialize_body(), headers=headers)
    assert after.status_code == 200, after.text
