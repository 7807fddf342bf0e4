"""A call becomes one HTTP request to the API: path values encoded whole (no ``/`` or ``..`` gets
into the path), query and header parameters where the operation puts them, a JSON body, the
configured credential last; and the answer becomes structured content and text, a tool error for a
status other than 2xx, and is read no further than the size cap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.harness import free_port
from tests.support.openapi_api import API_KEY, BIG_BYTES, CLIENT_ID, CLIENT_SECRET, DOCUMENT, OpenApiApi
from tests.upstreams.support import upstream_config
from upstreams.config import UpstreamConfig
from upstreams.egress import exception_egress_refusal
from upstreams.openapi import calls as module
from upstreams.openapi.auth import OpenApiOAuthError
from upstreams.openapi.calls import openapi_call
from upstreams.openapi.tools import openapi_tools_generate

TOOLS = tuple(openapi_tools_generate(document=DOCUMENT, selects=lambda name: True).tools)


@pytest.fixture(scope="module")
def api() -> Iterator[OpenApiApi]:
    server = OpenApiApi().start()
    yield server
    server.stop()


def _config(api: OpenApiApi, **overrides: Any) -> UpstreamConfig:
    return upstream_config(transport="openapi", url=f"{api.origin}/v1", openapi_tools=TOOLS, **overrides)


def _text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


async def test_a_json_object_is_the_structured_content_and_the_same_json_as_text(api):
    result = await openapi_call(config=_config(api), tool_name="showPet", arguments={"petId": "7"})
    assert result["structuredContent"] == {"id": "7", "name": "Rex"}
    assert json.loads(_text(result)) == {"id": "7", "name": "Rex"}
    assert result["isError"] is False


async def test_a_json_array_is_wrapped_as_the_result_of_an_object(api):
    result = await openapi_call(config=_config(api), tool_name="listPets", arguments={"limit": 1})
    assert result["structuredContent"] == {"result": [{"id": "1", "name": "Rex"}]}
    assert api.requests[-1]["query"] == [("limit", "1")]


async def test_an_array_query_parameter_is_sent_as_repeated_keys(api):
    await openapi_call(config=_config(api), tool_name="listPets", arguments={"tag": ["a b", "c&d"]})
    assert api.requests[-1]["query"] == [("tag", "a b"), ("tag", "c&d")]


@pytest.mark.parametrize("value", ["../admin", "a/b", "%2e%2e", "?x=1#frag"])
async def test_a_path_value_is_encoded_whole_and_never_adds_a_segment(api, value):
    await openapi_call(config=_config(api), tool_name="showPet", arguments={"petId": value})
    path = api.requests[-1]["path"]
    assert path.startswith("/v1/pets/")
    assert "/" not in path.removeprefix("/v1/pets/")
    assert api.requests[-1]["query"] == []


@pytest.mark.parametrize("value", ["..", ".", ""])
async def test_a_path_value_of_dots_is_refused_as_a_tool_error_without_a_request(api, value):
    before = len(api.requests)
    result = await openapi_call(config=_config(api), tool_name="showPet", arguments={"petId": value})
    assert result == {
        "content": [{"type": "text", "text": module.PATH_VALUE_REFUSED.format(argument="petId")}],
        "isError": True,
    }
    assert len(api.requests) == before


async def test_a_header_parameter_with_a_line_break_is_refused(api):
    result = await openapi_call(
        config=_config(api), tool_name="showPet", arguments={"petId": "1", "X-Trace": "a\r\nX-Admin: 1"}
    )
    assert _text(result) == module.HEADER_VALUE_REFUSED.format(argument="X-Trace")


async def test_a_header_parameter_and_a_json_body_are_sent(api):
    await openapi_call(config=_config(api), tool_name="showPet", arguments={"petId": "1", "X-Trace": "t-1"})
    assert api.requests[-1]["headers"]["X-Trace"] == "t-1"
    created = await openapi_call(
        config=_config(api), tool_name="createPet", arguments={"body": {"name": "Zoé"}}
    )
    assert created["structuredContent"] == {"id": "3", "name": "Zoé"}
    assert api.requests[-1]["headers"]["Content-Type"] == "application/json"
    assert json.loads(api.requests[-1]["body"]) == {"name": "Zoé"}


async def test_a_status_other_than_2xx_is_a_tool_error_with_the_status_and_the_body(api):
    result = await openapi_call(config=_config(api), tool_name="showPet", arguments={"petId": "404"})
    assert result == {
        "content": [{"type": "text", "text": 'The API answered HTTP 404: {"error": "no such pet"}'}],
        "isError": True,
    }


async def test_a_text_answer_is_text_content_only(api):
    result = await openapi_call(config=_config(api), tool_name="readNotes", arguments={})
    assert result == {"content": [{"type": "text", "text": "feed the cat ✓"}], "isError": False}


async def test_an_answer_larger_than_the_cap_is_not_read_to_its_end(api):
    assert BIG_BYTES > module.MAX_RESPONSE_BYTES
    result = await openapi_call(config=_config(api), tool_name="bigAnswer", arguments={})
    assert result == {"content": [{"type": "text", "text": module.TOO_LARGE}], "isError": True}


async def test_a_static_header_credential_is_sent_and_cannot_be_replaced_by_an_argument(api):
    api.auth = "header"
    try:
        config = _config(api, auth="header", header_name="X-Api-Key", header_value=API_KEY)
        result = await openapi_call(config=config, tool_name="showPet", arguments={"petId": "1"})
        without = await openapi_call(config=_config(api), tool_name="showPet", arguments={"petId": "1"})
    finally:
        api.auth = "none"
    assert result["isError"] is False
    assert without["isError"] is True
    assert API_KEY not in _text(without)


async def test_an_api_key_in_the_query_is_sent_after_the_arguments(api):
    api.auth = "query"
    try:
        config = _config(api, auth="query", header_name="api_key", header_value=API_KEY)
        result = await openapi_call(config=config, tool_name="listPets", arguments={"limit": 2})
    finally:
        api.auth = "none"
    assert result["isError"] is False
    assert api.requests[-1]["query"] == [("limit", "2"), ("api_key", API_KEY)]


async def test_an_oauth_token_is_got_once_and_got_again_when_the_api_refuses_it(api):
    api.auth = "oauth"
    config = _config(
        api,
        auth="oauth",
        oauth_client_id=CLIENT_ID,
        oauth_client_secret=CLIENT_SECRET,
        openapi_token_url=f"{api.origin}/oauth/token",
        version="oauth-test",
    )
    try:
        before = api.token_requests
        first = await openapi_call(config=config, tool_name="showPet", arguments={"petId": "1"})
        second = await openapi_call(config=config, tool_name="showPet", arguments={"petId": "2"})
        tokens_used = api.token_requests - before
        api.tokens.clear()
        third = await openapi_call(config=config, tool_name="showPet", arguments={"petId": "3"})
    finally:
        api.auth = "none"
    assert [r["isError"] for r in (first, second, third)] == [False, False, False]
    assert tokens_used == 1
    assert api.token_requests - before == 2


async def test_a_refused_client_secret_raises_without_the_secret(api):
    config = _config(
        api,
        auth="oauth",
        oauth_client_id=CLIENT_ID,
        oauth_client_secret="wrong-" + CLIENT_SECRET,
        openapi_token_url=f"{api.origin}/oauth/token",
        version="oauth-wrong",
    )
    with pytest.raises(OpenApiOAuthError) as refused:
        await openapi_call(config=config, tool_name="showPet", arguments={"petId": "1"})
    assert str(refused.value) == "the token endpoint answered HTTP 401"


async def test_a_tool_no_longer_stored_is_a_tool_error(api):
    result = await openapi_call(config=_config(api), tool_name="gone", arguments={})
    assert result == {"content": [{"type": "text", "text": module.UNKNOWN_TOOL}], "isError": True}


async def test_an_unreachable_api_fails_without_the_api_key_in_the_error(api):
    config = upstream_config(
        transport="openapi",
        url=f"http://127.0.0.1:{free_port()}/v1",
        openapi_tools=TOOLS,
        auth="query",
        header_name="api_key",
        header_value=API_KEY,
    )
    with pytest.raises(ConnectionError) as failed:
        await openapi_call(config=config, tool_name="listPets", arguments={})
    assert str(failed.value) == module.REQUEST_FAILED.format(kind="ConnectError")
    assert API_KEY not in str(failed.value)


async def test_a_private_address_is_refused_when_the_deployment_does_not_allow_it(api, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "UPSTREAM_PRIVATE_NETWORKS": []}
    before = len(api.requests)
    with pytest.raises(ConnectionError) as refused:
        await openapi_call(config=_config(api), tool_name="listPets", arguments={})
    assert exception_egress_refusal(refused.value) is not None
    assert len(api.requests) == before
