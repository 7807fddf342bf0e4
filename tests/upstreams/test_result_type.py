"""An upstream's 2026-07-28 result without ``resultType`` reads as a complete one (SEP-2322); a
result of a handshake session, or one read before the session has a version, is left as it came."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse

from upstreams.result_type import ResultTypeDefaulted


async def _read(result: dict[str, Any], *, version: str | None) -> dict[str, Any]:
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](1)
    await send.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=1, result=result)))
    await send.aclose()
    async with ResultTypeDefaulted(receive, version=lambda: version) as stream:
        read = [item async for item in stream]
    message = read[0].message
    assert isinstance(message, JSONRPCResponse)
    return message.result


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2026-07-28", {"content": [], "resultType": "complete"}),
        ("2025-11-25", {"content": []}),
        (None, {"content": []}),
    ],
)
async def test_a_result_without_its_type_is_complete_only_at_a_revision_that_has_types(
    version: str | None, expected: dict[str, Any]
):
    assert await _read({"content": []}, version=version) == expected


async def test_a_result_that_names_its_type_keeps_it():
    read = await _read({"resultType": "input_required", "inputRequests": {}}, version="2026-07-28")

    assert read["resultType"] == "input_required"
