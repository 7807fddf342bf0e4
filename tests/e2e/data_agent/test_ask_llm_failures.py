"""What an MCP client reads when the language model fails: ``ask_question`` through the official SDK
client against Daphne. The failures are litellm's own exceptions, raised by litellm through its
``mock_response`` (the script file named by ``LLM_MOCK_RESPONSES_FILE``: the session's gateway
server's, which each test writes first), and a key missing from a server that runs without a
script. Each reaches the client as a JSON-RPC error, as every ``GatehouseError`` a tool raises does
(``mcp_gateway/kernel/jsonrpc_errors.py``), with its own message, code and ``data.reason``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from language_models.completion import (
    LLM_CONTEXT_TOO_LONG,
    LLM_ENVIRONMENT_KEY_REFUSED,
    LLM_MODEL_NOT_FOUND,
    LLM_PROVIDER_FAILED,
    LLM_RATE_LIMITED,
    LLM_TIMED_OUT,
)
from language_models.model_checks import LLM_MISSING_KEY
from tests.e2e.harness import DaphneServer, Person, sdk_client
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db

MODEL = "openai/gpt-4o-mini"


@pytest.fixture(scope="module")
def keyless_server(demo, database_url, tmp_path_factory) -> Iterator[DaphneServer]:
    """No script, so calls are real; and no OpenAI key in its environment, whatever this one has."""
    log_path = Path(tmp_path_factory.mktemp("daphne")) / "keyless.log"
    server = DaphneServer(database_url=database_url, log_path=log_path)
    server.env.pop("OPENAI_API_KEY", None)
    server.env.pop("LLM_MOCK_RESPONSES_FILE", None)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def acme_sales(demo) -> Ontology:
    return Ontology.objects.get(tenant__slug="acme", name=ONTOLOGY_NAME)


@pytest.fixture
def acme_model(committed) -> None:
    from accounts.models import Tenant

    # No stored key: the provider's key would come from the server's environment.
    committed(
        LanguageModelFactory, tenant=Tenant.objects.get(slug="acme"), name="M", model=MODEL, is_default=True
    )


async def _ask(server: DaphneServer, ontology: Ontology) -> MCPError:
    async with sdk_client(server, Person("alice")) as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool(
                "ask_question", {"ontologyId": str(ontology.id), "question": "Sales by region?"}
            )
    return refusal.value


@pytest.mark.parametrize(
    ("litellm_error", "code", "message", "data"),
    [
        ("AuthenticationError", -32003, LLM_ENVIRONMENT_KEY_REFUSED, {"reason": "llm_credentials_refused"}),
        ("NotFoundError", -32003, LLM_MODEL_NOT_FOUND, {"reason": "llm_model_not_found"}),
        (
            "ContextWindowExceededError",
            -32003,
            LLM_CONTEXT_TOO_LONG,
            {"reason": "llm_context_window_exceeded"},
        ),
        ("RateLimitError", -32005, LLM_RATE_LIMITED, {"reason": "llm_rate_limited", "retryAfterSeconds": 30}),
        ("ServiceUnavailableError", -32005, LLM_PROVIDER_FAILED, {"reason": "llm_provider_failed"}),
    ],
)
async def test_the_client_reads_what_went_wrong_with_the_model(
    gateway_server, script_path, acme_sales, acme_model, litellm_error, code, message, data
):
    script_path.write_text(json.dumps({"responses": {"planner": {"error": litellm_error}}}))

    error = (await _ask(gateway_server, acme_sales)).error

    assert (error.code, error.message, error.data) == (code, message.format(model=MODEL), data)
    assert "scripted" not in error.message


async def test_a_provider_timeout_reaches_the_client_as_a_timeout(
    gateway_server, script_path, acme_sales, acme_model
):
    script_path.write_text(json.dumps({"responses": {"planner": {"error": "Timeout"}}}))

    error = (await _ask(gateway_server, acme_sales)).error

    assert error.code == -32004
    assert error.message == LLM_TIMED_OUT.format(model=MODEL, seconds=60)
    assert error.data == {"reason": "llm_timeout", "timeoutSeconds": 60}


async def test_a_missing_key_is_named_to_the_client_at_once(keyless_server, acme_sales, acme_model):
    arguments = {"ontologyId": str(acme_sales.id), "question": "Sales by region?"}
    errors, times = [], []
    async with sdk_client(keyless_server, Person("alice")) as (client, _):
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(MCPError) as refusal:
                await client.call_tool("ask_question", arguments)
            times.append(time.monotonic() - started)
            errors.append(refusal.value.error)
    # Figures for the report, not assertions (a shared machine): the first call imports litellm.
    print(f"missing key through MCP: first call {times[0]:.2f} s, second {times[1] * 1000:.0f} ms")

    for error in errors:
        assert error.code == -32003
        assert error.message == LLM_MISSING_KEY.format(provider="openai", variables="OPENAI_API_KEY")
        assert error.message == (
            "Missing API key for openai: set OPENAI_API_KEY or enter it in the admin (Language models)."
        )
        assert error.data == {
            "reason": "llm_missing_key",
            "provider": "openai",
            "variables": ["OPENAI_API_KEY"],
        }
