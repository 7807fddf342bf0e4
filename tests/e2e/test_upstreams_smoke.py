"""Smoke: an upstream's tools through Gatehouse."""

from __future__ import annotations

import pytest

from tests.e2e.harness import Person, sdk_client
from tests.upstream_support import UpstreamProcess, upstream_row

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def http_upstream(tmp_path_factory):
    process = UpstreamProcess("http", workdir=tmp_path_factory.mktemp("upstream")).start()
    yield process
    process.kill()


async def test_smoke(server, committed, http_upstream):
    committed(upstream_row, tenant="acme", name="tests", url=http_upstream.url, prefix_tools=True)
    async with sdk_client(server, Person("alice")) as (client, _):
        tools = await client.list_tools()
        names = {t.name for t in tools.tools}
        assert "tests_echo" in names, names
        result = await client.call_tool("tests_echo", {"text": "hi"})
        assert result.structured_content["text"] == "hi", result
