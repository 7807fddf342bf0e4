"""Every error the LLM gateway's REST API answers, in its one shape, through real HTTP against
Daphne: malformed and hostile requests (400, 404, 405, 413, never a 500), the provider's failures
raised by litellm itself through ``mock_response`` (429 with Retry-After, 502, 503, 504, 404, 400),
and our own rate limit (429). Each call that got past authentication leaves its audit row."""

from __future__ import annotations

import json

import httpx
import pytest

from accounts.models import Role
from core.models import AuditAction, AuditEvent, RateLimitScope
from language_models.models import LlmUsage
from tests.e2e.llm_gateway_support import (
    INVOKE,
    MESSAGES,
    api_client,
    api_token,
    assert_error,
    invoke_body,
    script,
)
from tests.support.factories import MembershipFactory, RateLimitRuleFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(committed, gateway_server, acme_openai) -> str:
    return api_token(committed, gateway_server)


async def _post(server, token, content: bytes | str, **headers: str) -> httpx.Response:
    async with api_client(server, token, **{"Content-Type": "application/json", **headers}) as http:
        return await http.post(INVOKE, content=content)


# What the client sent


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "gpt-4o-mini", "messages": MESSAGES}, "provider"),
        (invoke_body(messages=[]), "messages"),
        (invoke_body(messages=[{"role": "tool", "content": "x"}]), "messages.0.role"),
        (invoke_body(messages=[{"role": "user", "content": ["not", "a", "string"]}]), "messages.0.content"),
        (invoke_body(temperature=3), "temperature"),
        (invoke_body(max_tokens=0), "max_tokens"),
        (invoke_body(provider="Not A Provider!"), "provider"),
        (invoke_body(unexpected=True), "unexpected"),
        (invoke_body(extra={"api_base": "http://169.254.169.254/"}), "extra.api_base"),
        (invoke_body(extra={"mock_response": "free answer"}), "extra.mock_response"),
    ],
)
async def test_a_bad_request_is_a_400_naming_the_field(gateway_server, alice, body, field):
    async with api_client(gateway_server, alice) as http:
        response = await http.post(INVOKE, json=body)

    error = assert_error(response, status=400, code="validation_error")
    assert error["details"]["field"] == field


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"provider": "openai", "model": "\xff\xfe", "messages": []}',
        b"[" * 10_000 + b"]" * 10_000,
        b"",
    ],
    ids=["syntax", "invalid-utf8", "deep", "empty"],
)
async def test_a_body_that_is_not_json_is_a_400(gateway_server, alice, content):
    response = await _post(gateway_server, alice, content)

    assert_error(response, status=400, code="validation_error")


@pytest.mark.parametrize("text", ["NUL \u0000 inside", "lone \ud800 surrogate"], ids=["nul", "surrogate"])
async def test_unsendable_characters_in_a_message_are_refused_by_field(gateway_server, alice, text):
    content = json.dumps(invoke_body(messages=[{"role": "user", "content": text}]))

    response = await _post(gateway_server, alice, content)

    error = assert_error(response, status=400, code="validation_error")
    assert error["details"]["field"].startswith("messages")


async def test_a_huge_body_is_a_413(gateway_server, alice):
    content = json.dumps(invoke_body(messages=[{"role": "user", "content": "x" * 190_000}] * 30))

    response = await _post(gateway_server, alice, content)

    assert_error(response, status=413, code="payload_too_large")


async def test_a_malformed_header_key_is_refused_and_not_echoed(gateway_server, alice):
    response = await _post(
        gateway_server, alice, json.dumps(invoke_body()), **{"X-Provider-Api-Key": "two words"}
    )

    error = assert_error(response, status=400, code="validation_error")
    assert "two words" not in json.dumps(error)


async def test_unknown_paths_and_methods_answer_in_the_same_shape(gateway_server, alice):
    async with api_client(gateway_server, alice) as http:
        missing = await http.get("/api/v1/no-such-thing")
        outside = await http.get("/api/v2/llm/invoke")
        wrong_method = await http.get(INVOKE)

    assert_error(missing, status=404, code="not_found")
    assert_error(outside, status=404, code="not_found")
    assert_error(wrong_method, status=405, code="method_not_allowed")
    assert "POST" in wrong_method.headers["Allow"]


async def test_a_malformed_or_unknown_token_is_a_401_and_audited(gateway_server):
    async with api_client(gateway_server, **{"X-Request-Id": "bad-token-1"}) as http:
        unknown = await http.post(INVOKE, json=invoke_body(), headers={"Authorization": "Bearer nope"})
        malformed = await http.post(INVOKE, json=invoke_body(), headers={"Authorization": "Basic abc"})

    assert_error(unknown, status=401, code="unauthorized")
    assert_error(malformed, status=401, code="unauthorized")
    assert await AuditEvent.objects.filter(
        request_id="bad-token-1", action=AuditAction.TOKEN_REJECTED
    ).aexists()


# What the provider answered


@pytest.mark.parametrize(
    ("litellm_error", "status", "code"),
    [
        ("RateLimitError", 429, "provider_rate_limited"),
        ("APIError", 502, "provider_error"),
        ("InternalServerError", 502, "provider_error"),
        ("AuthenticationError", 502, "provider_refused"),
        ("ServiceUnavailableError", 503, "unavailable"),
        ("APIConnectionError", 503, "unavailable"),
        ("Timeout", 504, "timeout"),
        ("NotFoundError", 404, "model_not_found"),
        ("BadRequestError", 400, "provider_rejected_request"),
        ("ContextWindowExceededError", 400, "provider_rejected_request"),
    ],
)
async def test_each_provider_failure_has_its_status_and_code(
    gateway_server, script_path, alice, litellm_error, status, code
):
    script(script_path, {"error": litellm_error})
    request_id = f"provider-{litellm_error}"

    async with api_client(gateway_server, alice, **{"X-Request-Id": request_id}) as http:
        response = await http.post(INVOKE, json=invoke_body())

    error = assert_error(response, status=status, code=code)
    assert "scripted" not in error["message"]
    if status == 429:
        assert int(response.headers["Retry-After"]) >= 1
    row = await LlmUsage.objects.aget(request_id=request_id)
    assert (row.outcome, row.error_code) == ("error", code)
    event = await AuditEvent.objects.aget(request_id=request_id, action=AuditAction.LLM_INVOKED)
    assert (event.outcome, event.detail["error"]) == ("error", code)


# Ours


async def test_our_rate_limit_is_a_429_with_retry_after_and_audited_as_denied(gateway_server, committed):
    membership = committed(MembershipFactory, role=Role.ADMIN)
    committed(
        RateLimitRuleFactory,
        scope=RateLimitScope.TOOL,
        tenant=membership.tenant,
        target="llm_invoke",
        limit=1,
        period_seconds=3600,
    )
    token = api_token(
        committed, gateway_server, username=membership.user.username, tenant=membership.tenant.slug
    )

    async with api_client(gateway_server, token, **{"X-Request-Id": "limited-1"}) as http:
        first = await http.post(INVOKE, json=invoke_body())
        second = await http.post(INVOKE, json=invoke_body())

    # The tenant has no key: the first call passes the limit and is refused for that.
    assert_error(first, status=409, code="not_configured")
    error = assert_error(second, status=429, code="rate_limited")
    assert 1 <= int(second.headers["Retry-After"]) <= 3600
    assert error["details"]["retryAfterSeconds"] == int(second.headers["Retry-After"])
    events = AuditEvent.objects.filter(request_id="limited-1", action=AuditAction.LLM_INVOKED).order_by("pk")
    outcomes = [event.outcome async for event in events]
    assert outcomes == ["error", "denied"]
