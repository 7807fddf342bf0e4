"""CORS on /mcp, which Django's middleware never sees (core.cors.CorsAsgiMiddleware): preflights
answered before bearer authentication, neither refused nor audited; every answer to an allowed
origin readable, the 401's challenge included; foreign and malformed origins answered nothing and
still refused by the Origin check. Driven through the deployed ASGI application, in process."""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest

from config.asgi import application
from core.cors import CorsAsgiMiddleware, origin_allowed
from core.models import AuditAction, AuditEvent
from mcp_gateway.kernel.identity_cache import identity_cache

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_hot_path_pool")]

PUBLIC_URL = "https://gatehouse.example"
ALLOWED = "https://inspector.example"
FOREIGN = "https://evil.example"
EXPOSED = {"mcp-session-id", "mcp-protocol-version", "www-authenticate"}
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
).encode()
# What a browser sends ahead of the MCP Inspector's first POST.
PREFLIGHT_HEADERS = [
    (b"access-control-request-method", b"POST"),
    (b"access-control-request-headers", b"authorization,content-type,mcp-protocol-version"),
]
HOSTILE_ORIGINS = {
    "nul": b"https://inspector.example\x00",
    "nul-inside": b"https://inspector\x00.example",
    "huge": b"https://" + b"a" * 200_000 + b".example",
    "null": b"null",
    "invalid-utf8": b"https://inspector.\xff\xfe.example",
    "latin1-lookalike": b"https://inspector.ex\xe0mple",
    "line-break": b"https://inspector.example\n",
    "tab": b"https://inspector.exam\tple",
    "trailing-path": b"https://inspector.example/",
    "userinfo": b"https://inspector.example@evil.example",
    "two-in-one": b"https://inspector.example, https://evil.example",
    "suffix": b"https://inspector.example.evil.example",
    "bad-ipv6": b"https://[inspector.example",
    "wildcard": b"*",
}


@pytest.fixture(autouse=True)
def policy(settings) -> Iterator[None]:
    """A server on a public host with one allowed origin; every refusal its own audit row; and no
    listener for the identity cache (these requests never resolve a token)."""
    settings.PUBLIC_URL = PUBLIC_URL
    settings.CORS_ALLOWED_ORIGINS = [PUBLIC_URL, ALLOWED]
    settings.GATEHOUSE = {
        **settings.GATEHOUSE,
        "AUDIT_REFUSAL_WINDOW_SECONDS": 0,
        "MCP_IDENTITY_CACHE_SECONDS": 0,
    }
    yield
    identity_cache._off = False


class Answer:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        start = messages[0]
        self.status: int = start["status"]
        self.headers: dict[str, str] = {}
        for name, value in start["headers"]:
            key = bytes(name).decode("latin-1").lower()
            text = bytes(value).decode("latin-1")
            self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text
        self.body = b"".join(m.get("body", b"") for m in messages[1:])

    def cors(self) -> dict[str, str]:
        return {name: value for name, value in self.headers.items() if name.startswith("access-control-")}

    def exposed(self) -> set[str]:
        return {h.strip().lower() for h in self.headers.get("access-control-expose-headers", "").split(",")}


async def _call(
    app: Any,
    *,
    method: str,
    origin: bytes | None,
    headers: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
    body: bytes = b"",
    request_id: str = "",
) -> Answer:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    raw_headers = [(b"host", b"127.0.0.1"), *headers]
    if origin is not None:
        raw_headers.append((b"origin", origin))
    if request_id:
        raw_headers.append((b"x-request-id", request_id.encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": raw_headers,
        "client": ("198.51.100.7", 50000),
        "server": ("127.0.0.1", 8000),
    }
    await app(scope, receive, send)
    return Answer(sent)


@pytest.fixture
def mcp():
    async def call(method: str, origin: bytes | None, **kwargs: Any) -> Answer:
        return await _call(application, method=method, origin=origin, **kwargs)

    return call


async def _audited(request_id: str) -> list[AuditEvent]:
    return [event async for event in AuditEvent.objects.filter(request_id=request_id)]


async def test_an_allowed_origin_s_preflight_is_answered_before_authentication(mcp):
    answer = await mcp("OPTIONS", ALLOWED.encode(), headers=PREFLIGHT_HEADERS, request_id="cors-preflight")

    assert answer.status == 200
    assert answer.cors()["access-control-allow-origin"] == ALLOWED
    allowed = {h.strip() for h in answer.cors()["access-control-allow-headers"].split(",")}
    assert {
        "authorization",
        "content-type",
        "mcp-protocol-version",
        "mcp-session-id",
        "last-event-id",
    } <= allowed
    assert {"POST", "GET", "DELETE"} <= set(answer.cors()["access-control-allow-methods"].split(", "))
    assert "access-control-allow-credentials" not in answer.headers
    assert "www-authenticate" not in answer.headers
    assert answer.body == b""
    assert await _audited("cors-preflight") == []


async def test_a_foreign_origin_s_preflight_gets_no_allow_headers_and_no_audit_row(mcp):
    answer = await mcp("OPTIONS", FOREIGN.encode(), headers=PREFLIGHT_HEADERS, request_id="cors-foreign-pre")

    assert answer.status == 200
    assert answer.cors() == {}
    assert await _audited("cors-foreign-pre") == []


async def test_the_401_to_an_allowed_origin_exposes_its_challenge(mcp):
    answer = await mcp(
        "POST",
        ALLOWED.encode(),
        headers=[(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")],
        body=INITIALIZE,
    )

    assert answer.status == 401
    assert "resource_metadata=" in answer.headers["www-authenticate"]
    assert answer.cors()["access-control-allow-origin"] == ALLOWED
    assert answer.exposed() >= EXPOSED
    assert "origin" in answer.headers["vary"].lower()


async def test_the_server_s_own_origin_is_answered_too(mcp):
    answer = await mcp("POST", PUBLIC_URL.encode(), body=INITIALIZE)

    assert answer.status == 401
    assert answer.cors()["access-control-allow-origin"] == PUBLIC_URL


async def test_a_foreign_origin_s_request_is_still_refused_and_audited_with_nothing_to_read(mcp):
    answer = await mcp("POST", FOREIGN.encode(), body=INITIALIZE, request_id="cors-foreign-post")

    assert answer.status == 403
    assert json.loads(answer.body)["error"] == "invalid_origin"
    assert answer.cors() == {}
    [event] = await _audited("cors-foreign-post")
    assert (event.action, event.target) == (AuditAction.REQUEST_REFUSED, "origin")


async def test_a_request_without_an_origin_is_untouched(mcp):
    answer = await mcp("POST", None, body=INITIALIZE)

    assert answer.status == 401
    assert answer.cors() == {}
    assert "vary" not in answer.headers


async def test_an_options_request_that_is_no_preflight_goes_on_to_authentication(mcp):
    answer = await mcp("OPTIONS", ALLOWED.encode())

    assert answer.status == 401
    assert answer.cors()["access-control-allow-origin"] == ALLOWED


@pytest.mark.parametrize("origin", HOSTILE_ORIGINS.values(), ids=HOSTILE_ORIGINS.keys())
async def test_a_hostile_origin_s_preflight_is_answered_with_nothing_to_allow(mcp, origin):
    answer = await mcp("OPTIONS", origin, headers=PREFLIGHT_HEADERS)

    assert answer.status == 200
    assert answer.cors() == {}


@pytest.mark.parametrize("origin", HOSTILE_ORIGINS.values(), ids=HOSTILE_ORIGINS.keys())
async def test_a_hostile_origin_s_request_is_refused_never_a_server_error(mcp, origin):
    answer = await mcp("POST", origin, body=INITIALIZE)

    assert answer.status == 403
    assert json.loads(answer.body)["error"] == "invalid_origin"
    assert answer.cors() == {}


@pytest.mark.parametrize("origin", HOSTILE_ORIGINS.values(), ids=HOSTILE_ORIGINS.keys())
def test_the_origin_check_refuses_every_hostile_origin(origin):
    assert not origin_allowed(origin.decode("latin-1"))


def test_the_origin_check_and_the_cors_answer_agree_on_loopback_in_development(settings):
    settings.PUBLIC_URL = "http://127.0.0.1:8000"
    settings.CORS_ALLOWED_ORIGINS = [settings.PUBLIC_URL]

    assert origin_allowed("http://localhost:6274")
    assert origin_allowed("http://[::1]:6274")
    assert not origin_allowed("http://localhost.evil.example:6274")
    assert not origin_allowed(FOREIGN)


async def test_the_headers_are_added_to_whatever_the_app_answers_and_its_vary_kept():
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"mcp-session-id", b"s1"),
                    (b"vary", b"Accept"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"data: {}\n\n"})

    answer = await _call(CorsAsgiMiddleware(app), method="POST", origin=ALLOWED.encode())

    assert answer.status == 200
    assert answer.headers["mcp-session-id"] == "s1"
    assert answer.cors()["access-control-allow-origin"] == ALLOWED
    assert answer.exposed() >= EXPOSED
    assert {v.strip().lower() for v in answer.headers["vary"].split(",")} == {"accept", "origin"}
    assert answer.body == b"data: {}\n\n"
