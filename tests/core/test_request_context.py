"""Request ids, client addresses, the access log and the shape of a log line."""

from __future__ import annotations

import io
import json
import logging
import re

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from config.asgi import application
from config.log_format import PLAIN_FORMAT, JsonLogFormatter, RequestIdFilter, env_log_format
from core.request_context import client_ip

GENERATED_ID = re.compile(r"^[0-9a-f]{32}$")
PEER = ("198.51.100.7", 50000)
# A Django page that needs no database: the OAuth discovery document.
PAGE = "/.well-known/oauth-authorization-server"


@pytest.fixture
def log_lines():
    """Every log line the root logger writes during the test, formatted as in production."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)


@pytest.fixture
async def asgi():
    """The deployed ASGI application (request context middleware outermost), in process."""
    transport = httpx.ASGITransport(app=application, client=PEER)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


def _access_lines(lines: list[dict]) -> list[dict]:
    return [line for line in lines if line["logger"] == "gatehouse.access"]


async def test_a_sane_request_id_from_the_client_is_echoed(asgi):
    response = await asgi.get(PAGE, headers={"X-Request-Id": "client-id_42.a:b@c/d+e=f"})
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "client-id_42.a:b@c/d+e=f"


@pytest.mark.parametrize(
    "offered",
    [
        "has spaces in it",
        "x" * 129,
        "quote\"and'semicolon;",
        "",
    ],
    ids=["spaces", "oversized", "separators", "empty"],
)
async def test_an_unfit_request_id_is_replaced_by_a_fresh_one(asgi, offered):
    response = await asgi.get(PAGE, headers={"X-Request-Id": offered})
    assert GENERATED_ID.match(response.headers["x-request-id"])


async def test_a_request_without_an_id_gets_a_fresh_one_each_time(asgi):
    first = await asgi.get(PAGE)
    second = await asgi.get(PAGE)
    assert GENERATED_ID.match(first.headers["x-request-id"])
    assert GENERATED_ID.match(second.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_a_not_found_page_carries_a_request_id_too(asgi):
    response = await asgi.get("/no-such-page", headers={"X-Request-Id": "lost-1"})
    assert response.status_code == 404
    assert response.headers["x-request-id"] == "lost-1"


async def test_each_request_writes_one_json_access_line_with_its_request_id(asgi, log_lines):
    response = await asgi.get(PAGE, headers={"X-Request-Id": "access-1"})
    assert response.status_code == 200

    [line] = [line for line in _access_lines(log_lines()) if line["request_id"] == "access-1"]
    assert line["level"] == "INFO"
    assert line["method"] == "GET"
    assert line["path"] == PAGE
    assert line["status"] == 200
    assert line["ip"] == PEER[0]
    assert isinstance(line["duration_ms"], float)
    assert line["message"].startswith(f"GET {PAGE} 200 ")
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$", line["timestamp"])


async def test_the_access_log_leaves_out_the_query_string(asgi, log_lines):
    await asgi.get(f"{PAGE}?code=secret-authorization-code&state=xyz", headers={"X-Request-Id": "q-1"})

    [line] = [line for line in _access_lines(log_lines()) if line["request_id"] == "q-1"]
    assert line["path"] == PAGE
    assert "secret-authorization-code" not in json.dumps(line)


async def test_the_access_log_can_be_turned_off(asgi, log_lines, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "ACCESS_LOG": False}
    await asgi.get(PAGE, headers={"X-Request-Id": "quiet-1"})
    assert not [line for line in _access_lines(log_lines()) if line["request_id"] == "quiet-1"]


def test_a_log_line_outside_a_request_has_an_empty_request_id_and_the_exception_text(log_lines):
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError:
        logging.getLogger("gatehouse.test").exception("It went %s.", "wrong")

    [line] = [line for line in log_lines() if line["logger"] == "gatehouse.test"]
    assert line["level"] == "ERROR"
    assert line["message"] == "It went wrong."
    assert line["request_id"] == ""
    assert "ZeroDivisionError: division by zero" in line["exception"]


def test_a_request_id_given_explicitly_is_kept(log_lines):
    logging.getLogger("gatehouse.test").warning("replayed", extra={"request_id": "from-the-audit-row"})
    [line] = [line for line in log_lines() if line["logger"] == "gatehouse.test"]
    assert line["request_id"] == "from-the-audit-row"


def test_the_plain_format_carries_the_request_id_too():
    record = logging.LogRecord("gatehouse.test", logging.INFO, __file__, 1, "hello", None, None)
    RequestIdFilter().filter(record)
    line = logging.Formatter(PLAIN_FORMAT).format(record)
    assert line.endswith("INFO gatehouse.test [] hello")


@pytest.mark.parametrize(("value", "expected"), [(None, "json"), ("json", "json"), ("PLAIN", "plain")])
def test_log_format_accepts_json_and_plain(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("LOG_FORMAT", raising=False)
    else:
        monkeypatch.setenv("LOG_FORMAT", value)
    assert env_log_format() == expected


def test_log_format_refuses_anything_else(monkeypatch):
    monkeypatch.setenv("LOG_FORMAT", "xml")
    with pytest.raises(ImproperlyConfigured, match="LOG_FORMAT='xml'"):
        env_log_format()


def test_without_trusted_proxies_the_peer_is_the_client_whatever_it_forwards(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "TRUSTED_PROXY_COUNT": 0}
    assert client_ip(peer="203.0.113.5", forwarded_for="127.0.0.1") == "203.0.113.5"


def test_behind_one_proxy_the_client_is_the_entry_the_proxy_appended(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "TRUSTED_PROXY_COUNT": 1}
    # The client wrote 127.0.0.1 itself; only the proxy's own entry (rightmost) is believed.
    assert client_ip(peer="10.0.0.2", forwarded_for="127.0.0.1, 203.0.113.5") == "203.0.113.5"


def test_behind_two_proxies_the_client_is_the_second_entry_from_the_right(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "TRUSTED_PROXY_COUNT": 2}
    forwarded = "127.0.0.1, 203.0.113.5, 10.0.0.3"
    assert client_ip(peer="10.0.0.2", forwarded_for=forwarded) == "203.0.113.5"


def test_a_forwarded_chain_shorter_than_the_proxies_falls_back_to_the_peer(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "TRUSTED_PROXY_COUNT": 2}
    assert client_ip(peer="10.0.0.2", forwarded_for="203.0.113.5") == "10.0.0.2"


def test_a_forwarded_address_that_is_not_an_address_gives_none(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "TRUSTED_PROXY_COUNT": 1}
    assert client_ip(peer="10.0.0.2", forwarded_for="not-an-ip") is None


async def test_the_access_log_uses_the_forwarded_client_behind_a_trusted_proxy(asgi, log_lines, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "TRUSTED_PROXY_COUNT": 1}
    await asgi.get(PAGE, headers={"X-Request-Id": "proxied-1", "X-Forwarded-For": "203.0.113.9"})
    [line] = [line for line in _access_lines(log_lines()) if line["request_id"] == "proxied-1"]
    assert line["ip"] == "203.0.113.9"


async def test_django_s_request_lines_leave_out_the_request_and_its_query_string(asgi, log_lines):
    await asgi.get("/no-such-page?code=secret-authorization-code", headers={"X-Request-Id": "nf-1"})

    [line] = [line for line in log_lines() if line["logger"] == "django.request"]
    assert line["request_id"] == "nf-1"
    assert line["status_code"] == 404
    assert "request" not in line
    assert "secret-authorization-code" not in json.dumps(log_lines())
