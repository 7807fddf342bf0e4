"""``Mcp-Param-*`` headers (SEP-2243) over real HTTP: a 2026-07-28 ``tools/call`` whose headers
disagree with its body, or carry what no header should, is refused with -32020 and HTTP 400 (the
endpoint's JSON-RPC shape, never a 500), and the official client's own mirrored headers pass.

The fixtures are the conformance toolset's ``test_custom_headers`` tools; the checking is the SDK
transport's, for every toolset's annotated arguments (``mcp_gateway.kernel.tool_headers``)."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.param_headers import (
    ARGUMENTS,
    TOOL,
    b64,
    call_body,
    call_headers,
    matching_headers,
    member_token,
    only_message,
    post_call,
    received_arguments,
    refusal_of,
    result_of,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme_conformance(tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)


@pytest.fixture
def token_for(server, committed):
    def make(*, role: str = "viewer", tenant: str | None = "acme", scope: str = "mcp:read") -> str:
        return member_token(server, committed, role=role, tenant=tenant, scope=scope)

    return make


async def test_headers_that_agree_with_the_body_are_accepted_plain_or_base64(
    server, acme_conformance, token_for
):
    token = token_for()
    body = call_body({**ARGUMENTS, "non_ascii_val": "Grüße, 世界", "tab_val": "\tindented"})
    headers = matching_headers(token, NonAscii=b64("Grüße, 世界"), Tab=b64("\tindented"))
    result = result_of(await post_call(server, body, headers))
    assert result.get("isError") is not True
    assert received_arguments(result)["non_ascii_val"] == "Grüße, 世界"


@pytest.mark.parametrize(
    ("params", "why"),
    [
        ({"Region": "eu-central1", "Priority": "3"}, "a value that is not the body's"),
        ({"Region": "US-WEST1", "Priority": "3"}, "values are case-sensitive"),
        ({"Priority": "3"}, "the header is missing but the body has the value"),
        ({"Region": "us-west1", "Priority": "4"}, "a number that is not the body's"),
        ({"Region": b64("eu-central1"), "Priority": "3"}, "Base64 of another value"),
        ({"Region": "=?base64?dXMtd2VzdDE?=", "Priority": "3"}, "Base64 without its padding"),
        ({"Region": "=?base64?dXMt!!!d2VzdDE=?=", "Priority": "3"}, "characters outside Base64"),
        ({"Region": "=?base64?dXMtd2VzdDF=?=", "Priority": "3"}, "non-canonical Base64"),
        ({"Region": b64(b"\xff\xfeus-west1"), "Priority": "3"}, "Base64 of bytes that are not UTF-8"),
        ({"Region": "us-west1", "Priority": "3", "Verbose": "true"}, "a header for an argument not sent"),
    ],
)
async def test_headers_that_do_not_agree_with_the_body_are_refused(
    server, acme_conformance, token_for, params, why
):
    token = token_for()
    message = refusal_of(await post_call(server, call_body(ARGUMENTS), call_headers(token, **params)))
    assert message["id"] == 41, why
    assert len(message["error"]["message"]) < 200


async def test_a_header_for_an_argument_the_tool_does_not_declare_is_ignored(
    server, acme_conformance, token_for
):
    token = token_for()
    headers = matching_headers(token, Bogus="anything", Query="not-the-query")
    assert result_of(await post_call(server, call_body(ARGUMENTS), headers)).get("isError") is not True


async def test_a_null_argument_must_come_without_its_header(server, acme_conformance, token_for):
    token = token_for()
    body = call_body({**ARGUMENTS, "verbose": None}, name="test_custom_headers_null")
    with_header = await post_call(
        server, body, matching_headers(token, name="test_custom_headers_null", Verbose="false")
    )
    refusal_of(with_header)
    # Without the header the transport lets it through, and the argument check answers: the schema
    # says boolean, and null is not one.
    without = await post_call(
        server, body, call_headers(token, name="test_custom_headers_null", Region="us-west1", Priority="3")
    )
    assert without.status_code == 400, without.text
    error = only_message(without)["error"]
    assert error["code"] == -32602, error
    assert error["data"]["errors"] == [{"path": "/verbose", "message": "None is not of type 'boolean'"}]


async def test_a_header_sent_twice_is_refused(server, acme_conformance, token_for):
    token = token_for()
    headers = [*matching_headers(token).items(), ("Mcp-Param-Region", "us-west1")]
    refusal_of(await post_call(server, call_body(ARGUMENTS), headers))


async def test_raw_bytes_that_are_not_utf_8_in_a_header_are_a_mismatch(server, acme_conformance, token_for):
    token = token_for()
    headers = [(name.encode(), value.encode()) for name, value in call_headers(token, Priority="3").items()]
    headers.append((b"Mcp-Param-Region", b"us-west1\xff\xfe"))
    refusal_of(await post_call(server, call_body(ARGUMENTS), headers))


async def test_a_nul_in_a_value_rides_base64_and_reaches_the_tool(server, acme_conformance, token_for):
    token = token_for()
    body = call_body({**ARGUMENTS, "empty_val": "a\x00b"})
    result = result_of(await post_call(server, body, matching_headers(token, EmptyVal=b64("a\x00b"))))
    assert received_arguments(result)["empty_val"] == "a\x00b"


async def _raw_http(server, request: bytes) -> bytes:
    """Bytes no HTTP client library would send (a NUL inside a header line), over a plain socket."""
    address = urlsplit(server.mcp_url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), timeout=15)
    finally:
        writer.close()


def _request(server, token: str, extra_header_line: bytes) -> bytes:
    """A 2026-07-28 ``tools/call`` as raw bytes, with one header line of the caller's making."""
    body = json.dumps(call_body(ARGUMENTS)).encode()
    address = urlsplit(server.mcp_url)
    lines = [f"POST {address.path} HTTP/1.1", f"Host: {address.netloc}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in call_headers(token, Priority="3").items()]
    lines += ["Connection: close"]
    return "\r\n".join(lines).encode() + b"\r\n" + extra_header_line + b"\r\n\r\n" + body


async def test_a_nul_byte_inside_a_header_is_refused_without_a_500(server, acme_conformance, token_for):
    token = token_for()
    answer = await _raw_http(server, _request(server, token, b"Mcp-Param-Region: us-\x00west1"))
    # Daphne's HTTP parser refuses it before any application code: a NUL reaches a tool only
    # Base64-encoded (above).
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:500]


async def test_a_header_just_under_the_server_s_limit_is_still_checked(server, acme_conformance, token_for):
    token = token_for()
    big = "x" * 12_000
    refusal_of(await post_call(server, call_body(ARGUMENTS), call_headers(token, Region=big, Priority="3")))
    body = call_body({**ARGUMENTS, "internal_space_val": big})
    assert (
        result_of(await post_call(server, body, matching_headers(token, InternalSpace=big))).get("isError")
        is not True
    )


async def test_headers_over_the_server_s_limit_are_a_400(server, acme_conformance, token_for):
    token = token_for()
    lines = b"Mcp-Param-Region: " + b"x" * 9_000 + b"\r\nMcp-Param-Bogus: " + b"x" * 9_000
    answer = await _raw_http(server, _request(server, token, lines))
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:500]


async def test_a_huge_header_never_gets_a_500_and_the_server_carries_on(server, acme_conformance, token_for):
    token = token_for()
    try:
        answer = await _raw_http(server, _request(server, token, b"Mcp-Param-Region: " + b"x" * 1_000_000))
    except ConnectionError:
        answer = b""  # refused mid-upload: the server hung up before reading it all
    # One header line longer than Daphne's (Twisted's) 16 KiB line limit ends the connection
    # without an answer; when the headers pass the limit in several lines, it answers 400 first.
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer[:500]
    assert (
        result_of(await post_call(server, call_body(ARGUMENTS), matching_headers(token))).get("isError")
        is not True
    )


async def test_a_viewer_s_mismatch_is_the_same_refusal_and_a_match_is_served(
    server, acme_conformance, token_for
):
    token = token_for(role="viewer", scope="mcp:read")
    refusal_of(
        await post_call(server, call_body(ARGUMENTS), call_headers(token, Region="elsewhere", Priority="3"))
    )
    assert (
        result_of(await post_call(server, call_body(ARGUMENTS), matching_headers(token))).get("isError")
        is not True
    )


async def test_a_tenant_without_the_toolset_is_told_the_tool_is_unknown(server, acme_conformance, token_for):
    token = token_for(tenant=None)
    message = only_message(await post_call(server, call_body(ARGUMENTS), matching_headers(token)))
    assert message["error"]["code"] == -32602, message
    assert "Unknown tool" in message["error"]["message"]


async def test_the_official_client_mirrors_every_kind_of_value_and_is_accepted(
    server, committed, acme_conformance
):
    arguments = {
        **ARGUMENTS,
        "verbose": False,
        "debug": True,
        "empty_val": "",
        "method_val": "custom method",
        "float_val": 3.5,
        "non_ascii_val": "Hello, 世界",
        "whitespace_val": " padded ",
        "leading_space_val": " leading",
        "trailing_space_val": "trailing ",
        "internal_space_val": "hello world",
        "control_char_val": "line1\nline2",
        "crlf_val": "line1\r\nline2",
        "tab_val": "\tindented",
    }
    async with minted_sdk_client(committed, server, Person("alice"), mode="2026-07-28") as (client, _):
        result = await client.call_tool(TOOL, arguments)
        null_result = await client.call_tool(
            "test_custom_headers_null", {"region": "us-east1", "priority": 1, "query": "SELECT 1"}
        )
    assert not result.is_error, result
    assert received_arguments(result.model_dump(by_alias=True)) == arguments
    assert not null_result.is_error, null_result
