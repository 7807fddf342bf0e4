"""Hostile answers and states on protocol 2026-07-28's multi-round-trip calls, as raw HTTP: every
one gets the endpoint's JSON-RPC answer (an error, or the question asked again), never a 500.

The state's checks are the SDK's, under Gatehouse's key (``mcp_gateway.kernel.request_state``); what is
tested here is that they hold behind Gatehouse's layers, and that ``mcp_gateway.pipeline.input_required``
asks again rather than trusting an answer that is not what was asked.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from mcp.server.request_state import _principal_claim, _request_identity, compact_json

from mcp_gateway.kernel.request_state import request_state_security
from mcp_gateway.pipeline.input_required import INVALID_STATE
from tests.e2e.harness import E2E_SECRET_KEY
from tests.e2e.raw_mcp import RawMcp, sse_messages
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db

ELICITATION = "test_input_required_result_elicitation"
REQUEST_STATE = "test_input_required_result_request_state"
EVERY_CAPABILITY: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {}}


class Caller:
    """One person's raw 2026-07-28 calls (no session: each request stands alone)."""

    def __init__(self, server, raw: RawMcp, token: Any) -> None:
        self.server = server
        self.raw = raw
        self.token = token

    async def post(self, body: bytes | dict[str, Any], *, name: str = ELICITATION) -> httpx.Response:
        headers = self.raw.headers(
            **{"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name}
        )
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.raw.http.post(self.server.mcp_url, content=content, headers=headers)

    async def call(
        self,
        *,
        name: str = ELICITATION,
        capabilities: Any = None,
        **params: Any,
    ) -> tuple[int, dict[str, Any]]:
        response = await self.post(_body(name, capabilities, **params), name=name)
        return response.status_code, _message(response)


def _body(name: str, capabilities: Any = None, **params: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": EVERY_CAPABILITY
        if capabilities is None
        else capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}, **params, "_meta": meta},
    }


def _message(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code != 500, response.text
    [message] = [m for m in sse_messages(response) if "result" in m or "error" in m]
    return dict(message)


@pytest.fixture
async def caller(server, committed, tenant_toolset):
    membership = committed(MembershipFactory)
    token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url])
    tenant_toolset(membership.tenant.slug, "conformance", enabled=True)
    raw = RawMcp(token.token)
    yield Caller(server, raw, token)
    await raw.aclose()


def _accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def _asked_again(message: dict[str, Any]) -> bool:
    return message.get("result", {}).get("resultType") == "input_required"


def _text(message: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in message["result"]["content"])


@pytest.mark.parametrize(
    "state",
    ["v1.%%%not-base64%%%", "v1.AAAA", "v1.", "not-a-state", "v1.\u0000\u0000", "\u0000", "v1." + "A" * 5000],
)
async def test_a_state_that_is_not_one_this_server_sealed_is_refused(caller, state):
    status, message = await caller.call(inputResponses={"user_name": _accept(name="x")}, requestState=state)
    # On 2026-07-28 an invalid-params error carries HTTP 400 (the SDK's table, SEP-2243).
    assert status == 400
    assert message["error"]["code"] == -32602
    assert message["error"]["message"] == INVALID_STATE


@pytest.mark.parametrize("state", [123, {"s": "x"}, ["v1."], True])
async def test_a_state_that_is_not_a_string_is_refused(caller, state):
    status, message = await caller.call(requestState=state)
    assert status == 400
    assert message["error"]["code"] == -32602


async def test_a_three_megabyte_state_is_refused(caller):
    _, message = await caller.call(requestState="v1." + "A" * 3_000_000)
    assert message["error"]["code"] == -32602


def _sealed(caller: Caller, settings, *, name: str, state: Any, expires_in: float) -> str:
    """A state sealed as the server seals it (same key, same claims), for this caller."""
    settings.SECRET_KEY = E2E_SECRET_KEY
    token = caller.token
    principal = f"{token.user_id}:{token.tenant_id}:{token.application.client_id}"
    target, digest = _request_identity("tools/call", {"name": name, "arguments": {}})
    now = time.time()
    claims = {
        "v": 1,
        "iat": now - 700,
        "exp": now + expires_in,
        "m": "tools/call",
        "t": target,
        "a": digest,
        "s": compact_json(state),
        "aud": "gatehouse",
        "p": _principal_claim(principal),
    }
    return request_state_security().codec.seal(compact_json(claims).encode())


async def test_an_expired_state_is_refused_where_the_same_state_unexpired_completes(caller, settings):
    minted = {"fixture": "request_state"}
    confirmed = {"confirm": _accept(ok=True)}
    fresh = _sealed(caller, settings, name=REQUEST_STATE, state=minted, expires_in=300)
    status, message = await caller.call(name=REQUEST_STATE, inputResponses=confirmed, requestState=fresh)
    assert _text(message) == "state-ok: confirmed=True"

    expired = _sealed(caller, settings, name=REQUEST_STATE, state=minted, expires_in=-100)
    status, message = await caller.call(name=REQUEST_STATE, inputResponses=confirmed, requestState=expired)
    assert status == 400
    assert message["error"] == {
        "code": -32602,
        "message": INVALID_STATE,
        "data": {"reason": "invalid_request_state"},
    }


async def test_a_state_that_unseals_to_something_else_than_the_handlers_json_is_refused(caller, settings):
    sealed = _sealed(caller, settings, name=REQUEST_STATE, state=["not", "an", "object"], expires_in=300)
    _, message = await caller.call(
        name=REQUEST_STATE, inputResponses={"confirm": _accept(ok=True)}, requestState=sealed
    )
    assert message["error"]["code"] == -32602
    assert message["error"]["message"] == INVALID_STATE


async def test_nul_bytes_in_an_answer_are_text_like_any_other(caller):
    status, message = await caller.call(inputResponses={"user_name": _accept(name="Al\u0000ice")})
    assert status == 200
    assert _text(message) == "Hello, Al\u0000ice!"


async def test_an_unpaired_surrogate_in_an_answer_is_no_500(caller):
    body = json.dumps(_body(ELICITATION, inputResponses={"user_name": _accept(name="NAME")}))
    response = await caller.post(body.replace('"NAME"', '"\\ud800"').encode())
    message = _message(response)
    assert "result" in message or message["error"]["code"] == -32602


async def test_thousands_of_unasked_answers_are_ignored(caller):
    extra = {f"extra_{i}": _accept(name=str(i)) for i in range(5000)}
    _, message = await caller.call(inputResponses={**extra, "user_name": _accept(name="Alice")})
    assert _text(message) == "Hello, Alice!"


async def test_a_megabyte_answer_completes_and_is_echoed_whole(caller):
    name = "x" * 1_000_000
    _, message = await caller.call(inputResponses={"user_name": _accept(name=name)})
    assert _text(message) == f"Hello, {name}!"


async def test_a_nested_answer_is_refused_as_too_deep_to_parse(caller):
    nested: Any = "deep"
    for _ in range(60):
        nested = {"a": nested}
    _, message = await caller.call(inputResponses={"user_name": _accept(name=nested)})
    # Deeper than the endpoint parses: refused as a parse error before any model reads it.
    assert message["error"]["code"] == -32700
    assert len(json.dumps(message)) < 2000


async def test_an_answer_of_another_kind_or_off_the_form_is_asked_again(caller):
    sampled = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
    roots = {"roots": [{"uri": "file:///r"}]}
    for answer in (sampled, roots, _accept(name=5), _accept(nom="Alice"), _accept()):
        _, message = await caller.call(inputResponses={"user_name": answer})
        assert _asked_again(message), (answer, message)


async def test_a_declined_form_is_an_answer(caller):
    _, message = await caller.call(inputResponses={"user_name": {"action": "decline"}})
    assert _text(message) == "No name was given."


async def test_a_client_without_the_capability_is_refused_with_32021(caller):
    status, message = await caller.call(capabilities={"sampling": {}})
    assert status == 400
    assert message["error"]["code"] == -32021
    assert message["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
    _, message = await caller.call(name="test_input_required_result_capabilities", capabilities={})
    assert message["result"]["isError"] is True


async def test_a_capability_of_the_wrong_shape_is_no_500(caller):
    _, message = await caller.call(capabilities={"elicitation": 5, "sampling": "yes"})
    assert "error" in message or _asked_again(message)
