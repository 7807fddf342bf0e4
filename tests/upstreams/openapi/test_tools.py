"""Each selected operation becomes a tool named by its operationId (or its method and path), with
one argument per parameter and ``body`` for its JSON request body, every ``$ref`` inlined; a
document whose names are not tool names, or whose selected schemas refer to themselves, is refused
naming the operation; an operation Gatehouse cannot call is left out with the reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.errors import InvalidInput
from tests.support.openapi_api import DOCUMENT
from upstreams.openapi import tools as module
from upstreams.openapi.refs import CYCLE
from upstreams.openapi.tools import openapi_listed, openapi_tools_generate, openapi_write_scopes


def _everything(name: str) -> bool:
    return True


def _generate(document: dict[str, Any], **kwargs: Any) -> module.GeneratedTools:
    return openapi_tools_generate(document=document, selects=kwargs.pop("selects", _everything), **kwargs)


def _by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in _generate(document).tools}


def _refusal(document: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(InvalidInput) as refused:
        _generate(document, **kwargs)
    return str(refused.value)


def _one(method: str, path: str, operation: dict[str, Any], **components: Any) -> dict[str, Any]:
    operation = {"responses": {"200": {"description": "ok"}}, **operation}
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {path: {method: operation}},
        "components": components,
    }


def test_each_operation_becomes_a_tool_named_by_its_operation_id():
    assert sorted(_by_name(DOCUMENT)) == ["bigAnswer", "createPet", "listPets", "readNotes", "showPet"]


def test_a_tool_has_one_argument_per_parameter_with_its_path_items_parameters_and_references_followed():
    tool = _by_name(DOCUMENT)["showPet"]
    assert tool["inputSchema"] == {
        "type": "object",
        "properties": {"petId": {"type": "string"}, "X-Trace": {"type": "string"}},
        "required": ["petId"],
        "additionalProperties": False,
    }
    assert tool["description"] == "One pet, by its id."
    assert tool["annotations"]["readOnlyHint"] is True
    assert tool["call"]["parameters"][0] == {
        "name": "petId",
        "in": "path",
        "argument": "petId",
        "style": "simple",
        "explode": False,
    }


def test_a_json_request_body_is_the_body_argument_with_its_references_inlined():
    tool = _by_name(DOCUMENT)["createPet"]
    assert tool["inputSchema"]["properties"]["body"] == {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}, "tag": {"type": "string", "maxLength": 40}},
    }
    assert tool["inputSchema"]["required"] == ["body"]
    assert tool["annotations"] == {
        "readOnlyHint": False,
        "openWorldHint": True,
        "destructiveHint": False,
        "idempotentHint": False,
        "title": "Add a pet",
    }
    assert tool["call"]["body"] == {"argument": "body", "contentType": "application/json"}


def test_only_operations_that_change_data_need_the_write_scope():
    assert openapi_write_scopes(_generate(DOCUMENT).tools) == {"createPet": frozenset({"mcp:write"})}


def test_the_listed_tools_carry_nothing_of_the_call():
    listed = openapi_listed(_generate(DOCUMENT).tools)
    assert all("call" not in tool for tool in listed)
    assert {tool["name"] for tool in listed} == set(_by_name(DOCUMENT))


def test_only_the_selected_operations_are_generated():
    generated = _generate(DOCUMENT, selects=lambda name: name in {"listPets"})
    assert [tool["name"] for tool in generated.tools] == ["listPets"]


def test_an_operation_without_an_operation_id_is_named_from_its_method_and_path():
    document = _one(
        "get",
        "/users/{userId}/repos",
        {"parameters": [{"name": "userId", "in": "path", "required": True, "schema": {"type": "integer"}}]},
    )
    assert list(_by_name(document)) == ["get_users_userId_repos"]


def test_a_non_ascii_operation_id_is_refused_naming_the_operation():
    document = _one("get", "/whoami", {"operationId": "wh\u043eami"})
    assert _refusal(document) == module.BAD_OPERATION_ID.format(operation="GET '/whoami'", limit=64)


def test_an_operation_id_with_a_zero_width_space_is_refused():
    document = _one("get", "/a", {"operationId": "list\u200bpets"})
    assert _refusal(document) == module.BAD_OPERATION_ID.format(operation="GET '/a'", limit=64)


def test_a_name_too_long_once_prefixed_is_refused():
    document = _one("get", "/a", {"operationId": "a" * 60})
    assert _refusal(document, prefix="vendor_") == module.BAD_OPERATION_ID.format(
        operation="GET '/a'", limit=57
    )


def test_two_operations_of_one_name_are_refused():
    document = copy.deepcopy(DOCUMENT)
    document["paths"]["/notes"]["get"]["operationId"] = "listPets"
    assert _refusal(document) == module.DUPLICATE_NAME.format(
        first="GET '/pets'", second="GET '/notes'", name="listPets"
    )


def test_more_selected_operations_than_the_cap_are_refused():
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {f"/op{i}": {"get": {"operationId": f"op{i}", "responses": {}}} for i in range(301)},
    }
    assert _refusal(document) == module.TOO_MANY_TOOLS.format(count=301)
    assert len(_generate(document, selects=lambda name: name != "op0").tools) == 300


def test_a_schema_that_refers_to_itself_is_refused_naming_the_operation():
    node = {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/Node"}}}
    document = _one(
        "post",
        "/nodes",
        {
            "operationId": "addNode",
            "requestBody": {
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}
            },
        },
        schemas={"Node": node},
    )
    assert _refusal(document) == module.SCHEMA_REFUSED.format(
        operation="POST '/nodes'", name="addNode", reason=CYCLE.format(ref="#/components/schemas/Node")
    )
    # Left unselected, it is no obstacle.
    assert _generate(document, selects=lambda name: False).tools == []


def test_a_schema_that_doubles_at_every_level_is_refused_as_too_large():
    schemas = {
        f"S{i}": {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/components/schemas/S{i + 1}"},
                "b": {"$ref": f"#/components/schemas/S{i + 1}"},
            },
        }
        for i in range(20)
    }
    schemas["S20"] = {"type": "string"}
    document = _one(
        "post",
        "/x",
        {
            "operationId": "x",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}},
        },
        schemas=schemas,
    )
    assert "once its $refs are inlined" in _refusal(document)


def test_an_operation_that_requires_a_cookie_is_left_out_with_the_reason():
    document = _one(
        "get",
        "/a",
        {"operationId": "a", "parameters": [{"name": "session", "in": "cookie", "required": True}]},
    )
    assert _generate(document).left_out == [("a", module.COOKIE_REQUIRED)]


def test_an_operation_whose_required_body_is_not_json_is_left_out_with_the_reason():
    document = _one(
        "post",
        "/upload",
        {"operationId": "upload", "requestBody": {"required": True, "content": {"multipart/form-data": {}}}},
    )
    generated = _generate(document)
    assert generated.tools == []
    assert generated.left_out == [("upload", module.BODY_NOT_JSON.format(types="'multipart/form-data'"))]


def test_parameters_sharing_a_name_are_told_apart_by_where_they_go():
    document = _one(
        "put",
        "/items/{id}",
        {
            "operationId": "putItem",
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "id", "in": "query", "schema": {"type": "string"}},
                {"name": "body", "in": "query", "schema": {"type": "string"}},
                {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
            ],
            "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
        },
    )
    tool = _by_name(document)["putItem"]
    assert sorted(tool["inputSchema"]["properties"]) == ["body", "path_id", "query_body", "query_id"]
    assert tool["inputSchema"]["required"] == ["path_id"]
    assert tool["annotations"]["idempotentHint"] is True


def test_openapi_30_nullable_and_exclusive_bounds_become_json_schema():
    document = _one(
        "get",
        "/a",
        {
            "operationId": "a",
            "parameters": [
                {
                    "name": "n",
                    "in": "query",
                    "schema": {
                        "type": "integer",
                        "nullable": True,
                        "minimum": 0,
                        "exclusiveMinimum": True,
                        "example": 3,
                    },
                }
            ],
        },
    )
    document["openapi"] = "3.0.3"
    schema = _by_name(document)["a"]["inputSchema"]["properties"]["n"]
    assert schema == {"type": ["integer", "null"], "exclusiveMinimum": 0}


def test_a_property_named_like_a_keyword_is_still_inlined():
    document = _one(
        "post",
        "/a",
        {
            "operationId": "a",
            "requestBody": {
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {"default": {"$ref": "#/components/schemas/T"}},
                        }
                    }
                }
            },
        },
        schemas={"T": {"type": "boolean"}},
    )
    body = _by_name(document)["a"]["inputSchema"]["properties"]["body"]
    assert body["properties"] == {"default": {"type": "boolean"}}


def test_a_description_loses_the_characters_that_hide_or_reorder_text():
    document = _one(
        "get", "/a", {"operationId": "a", "summary": "safe\u202e txet", "description": "zero\u200bwidth"}
    )
    assert _by_name(document)["a"]["description"] == "safe txet\n\nzerowidth"


def test_an_operation_with_a_header_parameter_no_header_can_be_named_is_left_out():
    document = _one("get", "/a", {"operationId": "a", "parameters": [{"name": "X Bad\n", "in": "header"}]})
    assert _generate(document).left_out == [("a", module.HEADER_NAME_INVALID)]
