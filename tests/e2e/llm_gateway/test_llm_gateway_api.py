"""The LLM gateway's REST API through real HTTP against Daphne, each model call answered by litellm's
own ``mock_response`` (the LLM script): every endpoint's success, structured output held to its
schema, DeepSeek's emulated JSON mode, a header key used once and kept nowhere, the one error shape
for every status, and the OpenAPI document."""

from __future__ import annotations

import json

import pytest
from openapi_spec_validator import validate

from accounts.models import Tenant
from core.models import AuditAction, AuditEvent
from language_models.models import LanguageModel, LlmUsage
from tests.e2e.harness import DaphneServer
from tests.e2e.llm_gateway_support import (
    INVOKE,
    PROVIDERS,
    api_client,
    api_token,
    assert_error,
    invoke_body,
    mcp_token,
    script,
)
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db

HEADER_KEY = "sk-from-the-header-5f3c9a1e7d"


def _model(*, tenant: str, **fields: str) -> None:
    LanguageModelFactory(tenant=Tenant.objects.get(slug=tenant), **fields)


@pytest.fixture
def alice(committed, gateway_server) -> str:
    return api_token(committed, gateway_server)


async def _invoke(server: DaphneServer, token: str, body: object, **headers: str):
    async with api_client(server, token, **headers) as http:
        return await http.post(INVOKE, json=body)


# Success


async def test_a_call_answers_with_output_usage_cost_and_an_id_it_also_records(
    gateway_server, script_path, alice, acme_openai
):
    script(script_path, "Gatehouse is an MCP gateway.")

    response = await _invoke(gateway_server, alice, invoke_body(), **{"X-Request-Id": "req-llm-1"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"id", "output", "usage", "provider", "model", "cost"}
    assert body["output"] == "Gatehouse is an MCP gateway."
    assert (body["provider"], body["model"]) == ("openai", "gpt-4o-mini")
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    assert response.headers["X-Request-Id"] == "req-llm-1"
    row = await LlmUsage.objects.select_related("tenant", "user").aget(request_id="req-llm-1")
    assert row.user is not None
    assert (row.tenant.slug, row.user.username, row.channel, row.outcome) == ("acme", "alice", "api", "ok")
    assert row.total_tokens == usage["total_tokens"]
    assert body["id"] in (str(row.pk), row.pk.hex)
    event = await AuditEvent.objects.select_related("tenant").aget(
        request_id="req-llm-1", action=AuditAction.LLM_INVOKED
    )
    assert event.tenant is not None
    assert (event.outcome, event.username, event.tenant.slug) == ("ok", "alice", "acme")
    assert event.detail["provider"] == "openai"
    # One JSON log line for the call, with what an operator searches by, and never the prompt.
    lines = [json.loads(line) for line in gateway_server.log().splitlines() if '"req-llm-1"' in line]
    (call,) = [line for line in lines if line.get("event") == "api.call"]
    assert (call["method"], call["path"], call["status"]) == ("POST", INVOKE, 200)
    assert (call["provider"], call["model"], call["total_tokens"]) == (
        "openai",
        "gpt-4o-mini",
        usage["total_tokens"],
    )
    assert call["duration_ms"] > 0
    events = {line.get("event") for line in lines}
    assert {"model_request_started", "model_response_received"} <= events
    assert "What is Gatehouse?" not in json.dumps(lines)


async def test_the_providers_list_says_what_this_tenant_can_call(gateway_server, alice, acme_openai):
    async with api_client(gateway_server, alice) as http:
        response = await http.get(PROVIDERS)
        with_key = await http.get(PROVIDERS, headers={"X-Provider-Api-Key": HEADER_KEY})

    assert response.status_code == 200, response.text
    providers = {p["id"]: p for p in response.json()["providers"]}
    assert {"openai", "anthropic", "deepseek", "gemini", "ollama"} <= set(providers)
    assert providers["openai"]["available"] is True
    assert providers["anthropic"]["available"] is False
    assert "gpt-4o-mini" in " ".join(providers["openai"]["models"] or [])
    assert {p["id"]: p for p in with_key.json()["providers"]}["anthropic"]["available"] is True


async def test_the_health_of_the_api_needs_no_token(gateway_server):
    async with api_client(gateway_server) as http:
        response = await http.get("/api/v1/health")

    assert response.json() == {"status": "ok"}


# Structured output


async def test_output_matching_the_schema_comes_back_as_json(gateway_server, script_path, alice, acme_openai):
    script(script_path, json.dumps({"city": "Oslo", "population": 709000}))
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
    }

    response = await _invoke(gateway_server, alice, invoke_body(response_schema=schema))

    assert response.status_code == 200, response.text
    assert response.json()["output"] == {"city": "Oslo", "population": 709000}


async def test_output_that_breaks_the_schema_is_an_error_not_a_silent_pass(
    gateway_server, script_path, alice, acme_openai
):
    script(script_path, json.dumps({"city": "Oslo", "population": "many"}))
    schema = {"type": "object", "properties": {"population": {"type": "integer"}}, "required": ["population"]}

    response = await _invoke(
        gateway_server, alice, invoke_body(response_schema=schema), **{"X-Request-Id": "bad-1"}
    )

    error = assert_error(response, status=502, code="invalid_structured_output")
    assert "many" not in json.dumps(error)
    row = await LlmUsage.objects.aget(request_id="bad-1")
    assert (row.outcome, row.error_code) == ("error", "invalid_structured_output")


async def test_an_object_schema_without_additional_properties_refuses_extra_keys(
    gateway_server, script_path, alice, acme_openai
):
    script(script_path, json.dumps({"city": "Oslo", "mayor": "someone"}))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}

    response = await _invoke(gateway_server, alice, invoke_body(response_schema=schema))

    assert_error(response, status=502, code="invalid_structured_output")


async def test_a_response_schema_that_is_no_json_schema_is_a_validation_error(
    gateway_server, alice, acme_openai
):
    response = await _invoke(gateway_server, alice, invoke_body(response_schema={"type": "no-such-type"}))

    error = assert_error(response, status=400, code="validation_error")
    assert error["details"]["field"].startswith("response_schema")


async def test_deepseek_json_mode_parses_a_reply_wrapped_in_prose_and_fences(
    gateway_server, script_path, alice, committed
):
    committed(_model, tenant="acme", name="acme-deepseek", model="deepseek/deepseek-chat", api_key="sk-ds")
    script(
        script_path,
        'Sure! Here is the JSON you asked for:\n```json\n{"answer": 42, "unit": "none"}\n```\nAnything else?',
    )

    response = await _invoke(
        gateway_server,
        alice,
        invoke_body(provider="deepseek", model="deepseek-chat", extra={"json_mode": True}),
    )

    assert response.status_code == 200, response.text
    assert response.json()["output"] == {"answer": 42, "unit": "none"}


# Keys


async def test_a_header_key_is_used_for_that_call_and_found_nowhere_afterwards(
    gateway_server, script_path, alice
):
    # acme has no Anthropic key: only the header's makes the call possible.
    script(script_path, "From the header's key.")

    response = await _invoke(
        gateway_server,
        alice,
        invoke_body(provider="anthropic", model="claude-sonnet-4-5"),
        **{"X-Provider-Api-Key": HEADER_KEY, "X-Request-Id": "header-key-1"},
    )

    assert response.status_code == 200, response.text
    row = await LlmUsage.objects.aget(request_id="header-key-1")
    assert row.key_source == "header"
    assert HEADER_KEY not in gateway_server.log()
    assert not await LanguageModel.objects.filter(api_key_encrypted__contains=HEADER_KEY[:12]).aexists()
    for event in [e async for e in AuditEvent.objects.filter(request_id="header-key-1")]:
        assert HEADER_KEY not in json.dumps(event.detail)
    assert HEADER_KEY not in json.dumps([str(v) for v in row.__dict__.values()])


async def test_a_provider_with_no_key_for_this_tenant_is_not_configured(gateway_server, alice, acme_openai):
    response = await _invoke(
        gateway_server, alice, invoke_body(provider="anthropic", model="claude-sonnet-4-5")
    )

    error = assert_error(response, status=409, code="not_configured")
    assert "anthropic" in error["message"].lower()


async def test_another_tenants_stored_key_is_never_used(gateway_server, alice, committed):
    committed(_model, tenant="globex", name="globex-gemini", model="gemini/gemini-2.0-flash", api_key="gx")

    response = await _invoke(gateway_server, alice, invoke_body(provider="gemini", model="gemini-2.0-flash"))

    assert_error(response, status=409, code="not_configured")


# Tokens


async def test_no_token_is_a_401_naming_the_apis_metadata(gateway_server):
    async with api_client(gateway_server) as http:
        response = await http.post(INVOKE, json=invoke_body())

    assert_error(response, status=401, code="unauthorized")
    challenge = response.headers["WWW-Authenticate"]
    assert (
        f'resource_metadata="{gateway_server.public_url}/.well-known/oauth-protected-resource/api"'
        in challenge
    )


async def test_a_token_for_mcp_does_not_open_the_api(gateway_server, committed):
    token = mcp_token(committed, gateway_server)

    response = await _invoke(gateway_server, token, invoke_body())

    assert_error(response, status=401, code="unauthorized")
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


async def test_a_token_for_the_api_does_not_open_mcp(gateway_server, alice):
    async with api_client(gateway_server, alice) as http:
        response = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )

    assert response.status_code == 401


async def test_a_token_without_the_scope_is_a_403(gateway_server, committed, acme_openai):
    token = api_token(committed, gateway_server, scope="mcp:read")

    response = await _invoke(gateway_server, token, invoke_body())

    assert_error(response, status=403, code="insufficient_scope")
    assert 'error="insufficient_scope"' in response.headers["WWW-Authenticate"]


async def test_a_viewer_holds_no_llm_scope(gateway_server, committed, acme_openai):
    # bob is acme's viewer: even a token that names llm:invoke keeps only what his role allows.
    token = api_token(committed, gateway_server, username="bob")

    response = await _invoke(gateway_server, token, invoke_body())

    assert_error(response, status=403, code="insufficient_scope")


# The OpenAPI document


async def test_the_openapi_document_is_valid_and_describes_the_api(gateway_server):
    async with api_client(gateway_server) as http:
        response = await http.get("/api/v1/openapi.json")
        docs = await http.get("/docs")

    assert response.status_code == 200
    document = response.json()
    validate(document)
    assert document["openapi"].startswith("3.1")
    assert {"/api/v1/providers", "/api/v1/llm/invoke", "/api/v1/health"} <= set(document["paths"])
    invoke = document["paths"]["/api/v1/llm/invoke"]["post"]
    assert {"200", "400", "401", "403", "429", "502"} <= set(invoke["responses"])
    assert docs.status_code == 302
    assert docs.headers["Location"].endswith("/api/v1/docs")
