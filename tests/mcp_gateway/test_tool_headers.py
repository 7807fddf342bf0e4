"""Arguments a toolset mirrors into ``Mcp-Param-*`` headers (``mcp_gateway.kernel.tool_headers``): what the
tool publishes, what the server refuses when it is built, and how the SDK's transport judges a
request's headers against its body with the schema Gatehouse publishes (the conformance fixtures')."""

from __future__ import annotations

import base64
from typing import Annotated, Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from mcp.server.mcpserver.exceptions import InvalidSignature
from mcp.shared.inbound import find_invalid_x_mcp_header, validate_mcp_param_headers, x_mcp_header_map
from mcp_types import HEADER_MISMATCH
from starlette.requests import Request

from accounts.scopes import SCOPE_READ
from core.errors import HeaderMismatch
from mcp_gateway.kernel.registry import Registry, Toolset, registry_load, tool
from mcp_gateway.kernel.sdk import server_lowlevel
from mcp_gateway.kernel.tool_headers import mcp_header, param_headers_check
from mcp_gateway.pipeline.server import server_build


@tool(name="route", description="Routes on its arguments.", scopes=[SCOPE_READ])
async def route(
    region: Annotated[str, mcp_header("Region", description="Where")],
    count: Annotated[int, mcp_header("Count")],
    note: str,
    dry_run: Annotated[bool | None, mcp_header("DryRun")] = None,
) -> dict[str, Any]:
    return {}


def _registry(*specs: Any) -> Registry:
    return Registry([Toolset(name="headers", description="Header tests.", tools=specs)])


async def _schema(registry: Registry, name: str) -> dict[str, Any]:
    server = server_build(registry=registry)
    [listed] = [t for t in await server.list_tools() if t.name == name]
    return dict(listed.input_schema)


async def test_an_annotated_argument_carries_its_header_on_its_own_property():
    schema = await _schema(_registry(route), "route")

    assert find_invalid_x_mcp_header(schema) is None
    assert x_mcp_header_map(schema) == {("region",): "Region", ("count",): "Count", ("dry_run",): "DryRun"}
    assert schema["properties"]["region"] == {
        "description": "Where",
        "title": "Region",
        "type": "string",
        "x-mcp-header": "Region",
    }
    assert "x-mcp-header" not in schema["properties"]["note"]
    assert schema["required"] == ["region", "count", "note"]


async def test_an_optional_argument_is_published_as_its_one_type_with_no_null_default():
    schema = await _schema(_registry(route), "route")

    assert schema["properties"]["dry_run"] == {
        "title": "Dry Run",
        "type": "boolean",
        "x-mcp-header": "DryRun",
    }


def test_the_endpoint_s_sdk_server_finds_each_tool_s_headers_before_any_middleware():
    # The SDK's 2026-07-28 transport reads the schema through this lookup, for every toolset.
    server = server_build(registry=_registry(route))
    lookup = server_lowlevel(server=server).get_tool_input_schema

    assert lookup is not None
    assert x_mcp_header_map(lookup("route"))[("region",)] == "Region"
    assert lookup("no_such_tool") is None


@pytest.mark.parametrize("token", ["Bad Header", "", "Région", "a:b", "x\n", "Zone/1"])
def test_a_token_that_is_not_a_header_name_is_refused_when_the_toolset_is_imported(token):
    with pytest.raises(ImproperlyConfigured, match="not a valid header name"):
        mcp_header(token)


def test_a_header_on_an_argument_that_is_not_a_string_integer_or_boolean_is_refused_at_build():
    @tool(name="floaty", description="A float header.", scopes=[SCOPE_READ])
    async def floaty(ratio: Annotated[float, mcp_header("Ratio")]) -> dict[str, Any]:
        return {}

    with pytest.raises(InvalidSignature, match="integer/string/boolean"):
        server_build(registry=_registry(floaty))


def test_two_arguments_with_one_header_name_whatever_its_case_are_refused_at_build():
    @tool(name="twice", description="One header twice.", scopes=[SCOPE_READ])
    async def twice(
        a: Annotated[str, mcp_header("Region")], b: Annotated[str, mcp_header("region")]
    ) -> dict[str, Any]:
        return {}

    with pytest.raises(InvalidSignature, match="duplicates"):
        server_build(registry=_registry(twice))


def _b64(raw: bytes) -> str:
    return f"=?base64?{base64.b64encode(raw).decode()}?="


BODY = {"region": "us-west1", "priority": 3, "query": "q"}
MATCHING = {"mcp-param-region": "us-west1", "mcp-param-priority": "3"}


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        (BODY, MATCHING),
        (BODY, {**MATCHING, "mcp-param-region": _b64(b"us-west1")}),
        ({**BODY, "region": "Hello"}, {**MATCHING, "mcp-param-region": "=?base64?SGVsbG8=?="}),
        # No sentinel at both ends: the value is taken as it is.
        ({**BODY, "region": "SGVsbG8="}, {**MATCHING, "mcp-param-region": "SGVsbG8="}),
        ({**BODY, "region": "=?base64?SGVsbG8="}, {**MATCHING, "mcp-param-region": "=?base64?SGVsbG8="}),
        ({**BODY, "non_ascii_val": "Grüße"}, {**MATCHING, "mcp-param-nonascii": _b64("Grüße".encode())}),
        ({**BODY, "empty_val": ""}, {**MATCHING, "mcp-param-emptyval": ""}),
        ({**BODY, "verbose": False}, {**MATCHING, "mcp-param-verbose": "false"}),
        # An integer compares as a number.
        (BODY, {**MATCHING, "mcp-param-priority": "3.0"}),
        # Null is no value: no header either.
        ({**BODY, "verbose": None}, MATCHING),
        # A header for something the tool does not declare is no business of the check.
        (BODY, {**MATCHING, "mcp-param-bogus": "x", "mcp-param-query": "other"}),
    ],
)
async def test_headers_that_agree_with_the_body_pass(arguments, headers):
    schema = await _schema(
        registry_load(module_paths=["conformance_fixtures.toolset"]), "test_custom_headers"
    )

    assert validate_mcp_param_headers(schema, arguments, headers) is None


@pytest.mark.parametrize(
    ("arguments", "headers"),
    [
        (BODY, {**MATCHING, "mcp-param-region": "eu-west1"}),
        (BODY, {**MATCHING, "mcp-param-region": "US-WEST1"}),
        (BODY, {"mcp-param-priority": "3"}),
        (BODY, {**MATCHING, "mcp-param-priority": "3.5"}),
        (BODY, {**MATCHING, "mcp-param-region": "=?base64?dXMtd2VzdDE?="}),
        (BODY, {**MATCHING, "mcp-param-region": "=?base64?dXMt!!!d2VzdDE=?="}),
        (BODY, {**MATCHING, "mcp-param-region": "=?base64?dXMtd2VzdDF=?="}),
        (BODY, {**MATCHING, "mcp-param-region": _b64(b"\xff\xfe")}),
        (BODY, {**MATCHING, "mcp-param-region": "us-west1\x00"}),
        ({**BODY, "verbose": None}, {**MATCHING, "mcp-param-verbose": "false"}),
        (BODY, {**MATCHING, "mcp-param-verbose": "true"}),
        ({**BODY, "verbose": True}, {**MATCHING, "mcp-param-verbose": "True"}),
    ],
)
async def test_headers_that_do_not_agree_with_the_body_are_a_header_mismatch(arguments, headers):
    schema = await _schema(
        registry_load(module_paths=["conformance_fixtures.toolset"]), "test_custom_headers"
    )

    refusal = validate_mcp_param_headers(schema, arguments, headers)

    assert refusal is not None
    assert refusal.code == HEADER_MISMATCH


def _request(**headers: str) -> Request:
    raw = [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": raw})


REGION_SCHEMA = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}


def test_a_federated_call_on_2026_07_28_is_checked_like_the_server_s_own():
    modern = {"mcp_protocol_version": "2026-07-28"}
    param_headers_check(
        input_schema=REGION_SCHEMA,
        arguments={"region": "eu"},
        request=_request(**modern, mcp_param_region="=?base64?ZXU=?="),
    )
    with pytest.raises(HeaderMismatch) as refused:
        param_headers_check(
            input_schema=REGION_SCHEMA,
            arguments={"region": "eu"},
            request=_request(**modern, mcp_param_region="us"),
        )
    assert refused.value.jsonrpc_code == HEADER_MISMATCH
    assert "Mcp-Param-Region" in refused.value.message
    with pytest.raises(HeaderMismatch):
        param_headers_check(
            input_schema=REGION_SCHEMA, arguments={"region": "eu"}, request=_request(**modern)
        )


@pytest.mark.parametrize(
    "request_",
    [_request(mcp_protocol_version="2025-11-25"), _request(), None, object()],
    ids=["handshake-era", "no version", "no request", "not http"],
)
def test_a_handshake_era_call_or_one_without_http_headers_is_not_asked_for_them(request_):
    param_headers_check(input_schema=REGION_SCHEMA, arguments={"region": "eu"}, request=request_)


def test_arguments_that_are_not_an_object_are_left_to_the_argument_check():
    request = _request(mcp_protocol_version="2026-07-28", mcp_param_region="us")
    param_headers_check(input_schema=REGION_SCHEMA, arguments=["eu"], request=request)
