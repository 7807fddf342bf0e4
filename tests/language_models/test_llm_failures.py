"""A model that cannot work fails at once, and a provider that fails is retried a bounded number of
times and reported for what it is.

The provider here is a real HTTP server on loopback that answers as OpenAI's API does when it
fails, so litellm and the OpenAI SDK run their own code end to end (retries, exception mapping);
no test needs the internet.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from core.errors import (
    NotReady,
    Unavailable,
    UpstreamFailed,
    UpstreamNotFound,
    UpstreamRateLimited,
    UpstreamRefused,
    UpstreamRejectedRequest,
)
from language_models.completion import (
    LLM_CONTEXT_TOO_LONG,
    LLM_MODEL_NOT_FOUND,
    LLM_PROVIDER_FAILED,
    LLM_RATE_LIMITED,
    LLM_REQUEST_REJECTED,
    LLM_STORED_KEY_REFUSED,
    _timeout,
    llm_complete,
)
from language_models.model_checks import LLM_MISSING_KEY, ModelKeyMissing
from language_models.selectors import ModelConfig

API_KEY = "sk-test-never-shown-0123456789"
MESSAGES = [{"role": "user", "content": "How many orders were placed in March?"}]
# What a provider's error body may carry that must reach no client: the request, part of a key.
SECRET_IN_BODY = "echo of the request with key sk-test-never-shown-0123456789"


@dataclass
class FakeProvider:
    api_base: str
    requests: list[float] = field(default_factory=list)


@asynccontextmanager
async def fake_provider(status: int, message: str = SECRET_IN_BODY) -> AsyncIterator[FakeProvider]:
    """An OpenAI-compatible endpoint answering every request with ``status`` and an error body."""
    provider = FakeProvider(api_base="")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        provider.requests.append(time.monotonic())
        body = json.dumps({"error": {"message": message, "type": "error", "code": None}}).encode()
        writer.write(
            b"HTTP/1.1 %d Error\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            % (status, len(body))
            # The SDK waits as long as the provider asks before retrying: a millisecond here.
            + b"retry-after-ms: 1\r\nconnection: close\r\n\r\n"
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    provider.api_base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    try:
        yield provider
    finally:
        server.close()
        await server.wait_closed()


def _config(**overrides: object) -> ModelConfig:
    values: dict[str, object] = {
        "model": "openai/gpt-4o-mini",
        "api_key": API_KEY,
        "api_base": None,
        "temperature": 0.0,
        "max_output_tokens": 200,
        "timeout_seconds": 20.0,
        **overrides,
    }
    return ModelConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def no_script(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": None}
    return settings


@pytest.fixture
def no_openai_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return monkeypatch


# A missing key: refused before any request


async def test_a_missing_key_fails_before_any_request_reaches_the_provider(no_script, no_openai_key):
    async with fake_provider(500) as provider:
        config = _config(api_key=None, api_base=provider.api_base)
        started = time.monotonic()
        with pytest.raises(ModelKeyMissing) as raised:
            await llm_complete(config=config, messages=MESSAGES, purpose="sql")
        elapsed = time.monotonic() - started

    assert provider.requests == []
    assert raised.value.message == LLM_MISSING_KEY.format(provider="openai", variables="OPENAI_API_KEY")
    assert raised.value.data == {
        "reason": "llm_missing_key",
        "provider": "openai",
        "variables": ["OPENAI_API_KEY"],
    }
    assert raised.value.jsonrpc_code == -32003
    # A figure for the report, not an assertion: the machine is shared.
    print(f"missing key refused in {elapsed * 1000:.1f} ms")


async def test_an_anthropic_model_without_its_key_names_its_variable(no_script, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("ANTHROPIC_FEDERATION_RULE_ID", raising=False)

    with pytest.raises(ModelKeyMissing) as raised:
        await llm_complete(
            config=_config(model="anthropic/claude-sonnet-4-5", api_key=None),
            messages=MESSAGES,
            purpose="sql",
        )

    assert raised.value.message == (
        "Missing API key for anthropic: set ANTHROPIC_API_KEY or enter it in the admin (Language models)."
    )


async def test_a_refusal_before_sending_is_logged_with_its_reason(no_script, no_openai_key, caplog):
    with (
        caplog.at_level(logging.WARNING, logger="language_models.completion"),
        pytest.raises(ModelKeyMissing),
    ):
        await llm_complete(config=_config(api_key=None), messages=MESSAGES, purpose="sql")

    [record] = [r for r in caplog.records if getattr(r, "event", None) == "llm.refused"]
    assert record.reason == "llm_missing_key"


async def test_a_scripted_call_needs_no_key(settings, tmp_path, no_openai_key):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": {"sql": "SELECT 1"}}))
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(path)}

    completion = await llm_complete(config=_config(api_key=None), messages=MESSAGES, purpose="sql")

    assert completion.text == "SELECT 1"


# Retries: bounded by LLM_MAX_RETRIES, and only for what may pass


@pytest.mark.parametrize("retries", [0, 2])
async def test_a_failing_provider_is_tried_once_plus_the_configured_retries(no_script, settings, retries):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MAX_RETRIES": retries}

    async with fake_provider(503) as provider:
        with pytest.raises(Unavailable) as raised:
            await llm_complete(config=_config(api_base=provider.api_base), messages=MESSAGES, purpose="sql")

    assert len(provider.requests) == 1 + retries
    assert raised.value.message == LLM_PROVIDER_FAILED.format(model="openai/gpt-4o-mini")


async def test_a_refused_key_is_never_retried(no_script, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MAX_RETRIES": 3}

    async with fake_provider(401) as provider:
        with pytest.raises(NotReady):
            await llm_complete(config=_config(api_base=provider.api_base), messages=MESSAGES, purpose="sql")

    assert len(provider.requests) == 1


def test_connecting_has_its_own_shorter_limit_within_the_models(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_CONNECT_TIMEOUT_SECONDS": 10}

    assert _timeout(_config(timeout_seconds=60.0)) == httpx.Timeout(60.0, connect=10.0)
    assert _timeout(_config(timeout_seconds=4.0)) == httpx.Timeout(4.0, connect=4.0)


# A real provider's HTTP failures, through litellm's own mapping


@pytest.mark.parametrize(
    ("status", "message", "expected", "text", "reason"),
    [
        (
            401,
            "Incorrect API key provided: sk-test***6789",
            UpstreamRefused,
            LLM_STORED_KEY_REFUSED,
            "llm_credentials_refused",
        ),
        (
            404,
            "The model `gpt-4o-mini` does not exist",
            UpstreamNotFound,
            LLM_MODEL_NOT_FOUND,
            "llm_model_not_found",
        ),
        (429, "Rate limit reached for requests", UpstreamRateLimited, LLM_RATE_LIMITED, "llm_rate_limited"),
        (
            400,
            "This model's maximum context length is 8192 tokens. Your messages resulted in 9000 tokens.",
            UpstreamRejectedRequest,
            LLM_CONTEXT_TOO_LONG,
            "llm_context_window_exceeded",
        ),
        (400, SECRET_IN_BODY, UpstreamRejectedRequest, LLM_REQUEST_REJECTED, "llm_request_rejected"),
        (500, SECRET_IN_BODY, UpstreamFailed, LLM_PROVIDER_FAILED, "llm_provider_failed"),
    ],
)
async def test_a_providers_http_failure_is_reported_for_what_it_is(
    no_script, caplog, status, message, expected, text, reason
):
    async with fake_provider(status, message) as provider:
        with caplog.at_level(logging.DEBUG), pytest.raises(expected) as raised:
            await llm_complete(config=_config(api_base=provider.api_base), messages=MESSAGES, purpose="sql")

    assert type(raised.value) is expected
    assert raised.value.message == text.format(model="openai/gpt-4o-mini")
    expected_data = {"reason": reason}
    if status == 429:
        # The provider's own Retry-After when it sent one; else the default wait.
        expected_data["retryAfterSeconds"] = raised.value.data["retryAfterSeconds"]
        assert 1 <= expected_data["retryAfterSeconds"] <= 3600
    assert raised.value.data == expected_data
    # The provider's body goes to the log (bounded, the key removed), never to the client.
    assert message not in raised.value.message
    assert API_KEY not in caplog.text
    assert API_KEY not in json.dumps(raised.value.data)
