"""An upstream's 2026-07-28 results without ``resultType`` read as complete ones.

SEP-2322 says a result that does not name its type is a complete one (the conformance suite's
``sep-2322-default-result-type-complete`` sends such a result), but the SDK's client validates
every 2026-07-28 result against a schema that requires the field, and fails the call. The SDK has
no setting for it, so the session's incoming messages pass through ``ResultTypeDefaulted``, which
fills the field in on a session that negotiated a revision that has it, before the SDK sees them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCResponse
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

COMPLETE = "complete"


class ResultTypeDefaulted:
    """The read stream of a session, with ``resultType: "complete"`` added to each result that
    lacks it once ``version()`` is a revision that has result types (never during negotiation,
    whose answers are read at no revision yet)."""

    def __init__(self, stream: Any, *, version: Callable[[], str | None]) -> None:
        self._stream = stream
        self._version = version

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def __aenter__(self) -> ResultTypeDefaulted:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._stream.__aexit__(*exc)

    def __aiter__(self) -> ResultTypeDefaulted:
        return self

    async def __anext__(self) -> Any:
        return self._defaulted(await self._stream.__anext__())

    async def receive(self) -> Any:
        return self._defaulted(await self._stream.receive())

    def _defaulted(self, item: Any) -> Any:
        if (
            isinstance(item, SessionMessage)
            and isinstance(item.message, JSONRPCResponse)
            and isinstance(item.message.result, dict)
            and "resultType" not in item.message.result
            and self._version() in MODERN_PROTOCOL_VERSIONS
        ):
            item.message.result["resultType"] = COMPLETE
        return item
