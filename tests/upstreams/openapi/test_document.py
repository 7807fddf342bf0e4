"""A document is accepted only as a valid OpenAPI 3.0 or 3.1 description of a bounded size, and
every hostile one (too big, Swagger 2, a YAML alias bomb, invalid UTF-8, NUL characters, references
outside it, thousands of operations, nested too deeply) is refused with one sentence that says
why, never an exception of the parser's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.errors import InvalidInput
from tests.support.openapi_api import DOCUMENT
from upstreams.openapi import document as module
from upstreams.openapi.document import openapi_document_parse


def _refusal(content: str | bytes) -> str:
    with pytest.raises(InvalidInput) as refused:
        openapi_document_parse(content=content)
    assert refused.value.data == {"field": "openapi_document"}
    return str(refused.value)


def _minimal(**paths: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths}


def test_a_json_document_is_accepted_as_it_was_written():
    assert openapi_document_parse(content=json.dumps(DOCUMENT).encode()) == DOCUMENT


def test_a_yaml_document_is_accepted_with_its_status_codes_and_dates_as_strings():
    text = (
        "openapi: 3.0.3\n"
        "info: {title: t, version: '1', x-released: 2024-01-02}\n"
        "paths:\n"
        "  /a:\n"
        "    get:\n"
        "      operationId: a\n"
        "      responses:\n"
        "        200: {description: ok}\n"
    )
    document = openapi_document_parse(content=text)
    assert document["paths"]["/a"]["get"]["responses"] == {"200": {"description": "ok"}}
    assert document["info"]["x-released"] == "2024-01-02"


def test_a_document_larger_than_the_cap_is_refused_before_it_is_parsed():
    huge = b"{" + b" " * module.MAX_DOCUMENT_BYTES + b"}"
    assert _refusal(huge) == module.TOO_BIG


def test_a_swagger_2_document_is_refused_with_the_way_to_convert_it():
    swagger = {"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": {}}
    assert _refusal(json.dumps(swagger)) == module.SWAGGER_2


def test_a_document_of_another_openapi_version_is_refused():
    assert _refusal(json.dumps({**_minimal(), "openapi": "4.0.0"})) == module.NOT_OPENAPI


def test_a_yaml_alias_bomb_is_refused_without_expanding_it():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(20)
    )
    assert _refusal(bomb) == module.YAML_ALIAS


def test_invalid_utf8_is_refused():
    assert _refusal(b'{"openapi": "3.0.3", "info": {"title": "\xff\xfe"}}') == module.NOT_UTF8


def test_a_nul_character_in_the_document_is_refused():
    document = _minimal()
    document["info"]["title"] = "nul \u0000 here"
    assert _refusal(json.dumps(document)) == module.UNSTORABLE.format(
        reason="contains a NUL character (\\u0000), which cannot be stored"
    )


def test_a_raw_nul_byte_is_refused_as_neither_json_nor_yaml():
    assert _refusal(b"openapi: 3.0.3\x00\n").startswith("openapi_document: neither JSON nor YAML")


def test_a_document_nested_too_deeply_is_refused():
    assert _refusal("[" * 100_000 + "]" * 100_000) == module.TOO_DEEP


def test_a_document_that_is_not_a_mapping_is_refused():
    assert _refusal("[1, 2]") == module.NOT_OBJECT


def test_a_reference_outside_the_document_is_refused_and_never_fetched():
    document = _minimal(
        **{
            "/a": {
                "get": {
                    "operationId": "a",
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {"schema": {"$ref": "http://169.254.169.254/latest#/x"}}
                            },
                        }
                    },
                }
            }
        }
    )
    assert _refusal(json.dumps(document)) == module.EXTERNAL_REF.format(
        ref="http://169.254.169.254/latest#/x"
    )


def test_a_document_with_thousands_of_operations_is_refused():
    paths = {
        f"/op{i}": {"get": {"operationId": f"op{i}", "responses": {"200": {"description": "ok"}}}}
        for i in range(5000)
    }
    assert _refusal(json.dumps(_minimal(**paths))) == module.TOO_MANY_OPERATIONS


def test_an_invalid_document_is_refused_with_the_validators_first_error():
    document = _minimal(**{"/a": {"get": {"operationId": "a"}}})
    message = _refusal(json.dumps(document))
    assert message.startswith("openapi_document: not a valid OpenAPI document: ")
    assert "responses" in message


def test_a_reference_to_nowhere_is_refused():
    document = _minimal(
        **{
            "/a": {
                "get": {
                    "operationId": "a",
                    "parameters": [{"$ref": "#/components/parameters/Missing"}],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        }
    )
    assert _refusal(json.dumps(document)).startswith("openapi_document: not a valid OpenAPI document: ")


def test_a_document_without_operations_is_refused():
    assert _refusal(json.dumps(_minimal())) == module.NO_PATHS
