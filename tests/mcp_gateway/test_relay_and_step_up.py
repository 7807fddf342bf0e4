"""The relay's local half and the step-up rule, without a server."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ErrorData

from core.identity import Identity
from mcp_gateway.transport.relay import LocalRelay
from mcp_gateway.transport.step_up import step_up_challenge
from tests.support.factories import IdentityFactory


async def test_an_answer_resolves_the_waiting_question():
    relay = LocalRelay()
    request_id = relay.new_request_id()
    answer = await relay.expect(request_id=request_id, session_id="s1")
    await relay.answer(session_id="s1", message={"jsonrpc": "2.0", "id": request_id, "result": {"ok": True}})
    assert await answer == {"ok": True}


async def test_an_error_answer_raises_in_the_waiting_tool():
    relay = LocalRelay()
    request_id = relay.new_request_id()
    answer = await relay.expect(request_id=request_id, session_id="s1")
    error = {"code": -1, "message": "User rejected"}
    await relay.answer(session_id="s1", message={"jsonrpc": "2.0", "id": request_id, "error": error})
    with pytest.raises(MCPError, match="User rejected"):
        await answer


async def test_another_session_cannot_answer():
    relay = LocalRelay()
    request_id = relay.new_request_id()
    answer = await relay.expect(request_id=request_id, session_id="s1")
    await relay.answer(session_id="s2", message={"jsonrpc": "2.0", "id": request_id, "result": {}})
    assert not answer.done()


async def test_a_cancellation_reaches_the_running_call_only_from_its_session():
    relay = LocalRelay()
    cancelled: list[str] = []
    relay.call_started(session_id="s1", request_id=7, cancel=lambda: cancelled.append("s1/7"))
    await relay.cancel(session_id="s2", request_id=7)
    await relay.cancel(session_id="s1", request_id="7")  # clients may echo an int id as a string
    assert cancelled == ["s1/7"]
    relay.call_finished(session_id="s1", request_id=7)
    await relay.cancel(session_id="s1", request_id=7)
    assert cancelled == ["s1/7"]


def test_request_ids_are_unguessable_and_distinct():
    ids = {LocalRelay.new_request_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(request_id) > 20 for request_id in ids)


def _identity(role: str, scopes: set[str]) -> Identity:
    return IdentityFactory.build(role=role, scopes=frozenset(scopes))


REFUSED = ErrorData(
    code=-32001, message="Insufficient scope", data={"required": ["mcp:write"], "missing": ["mcp:write"]}
)


def test_step_up_is_offered_when_the_role_allows_the_missing_scope():
    (header,) = step_up_challenge(identity=_identity("admin", {"mcp:read"}), error=REFUSED) or []
    assert header[0] == b"www-authenticate"
    assert b'error="insufficient_scope"' in header[1]
    assert b'scope="mcp:read mcp:write"' in header[1]


def test_step_up_is_not_offered_when_the_role_forbids_it_or_the_error_is_another():
    assert step_up_challenge(identity=_identity("viewer", {"mcp:read"}), error=REFUSED) is None
    other = ErrorData(code=-32001, message="Token revoked")
    assert step_up_challenge(identity=_identity("admin", {"mcp:read"}), error=other) is None
