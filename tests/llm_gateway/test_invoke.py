"""A gateway call: the model's answer with its usage and cost, one usage record per call past the
checks (answered, failed, refused), the counters that mirror them, and log lines that carry neither
the prompt nor a key."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest

from core.errors import BudgetExceeded, NotReady, UpstreamRateLimited, UpstreamRefused
from language_models.models import LlmBudget, LlmUsage, UsageOutcome
from llm_gateway.invoke import llm_gateway_invoke
from llm_gateway.metrics import GATEWAY_CALLS, GATEWAY_COST, GATEWAY_DURATION, GATEWAY_TOKENS
from llm_gateway.tool_loop import ToolAnswer
from tests.llm_gateway.conftest import HEADER_KEY, STORED_KEY, invoke_request

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "What is an MCP gateway? secret-prompt-marker"


def _sample(metric: Any, name: str, labels: dict[str, str]) -> float:
    # Read from the metric itself: the registry's database collectors cannot run on the event loop.
    for family in metric.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def _calls(tenant: str, outcome: str, channel: str = "api") -> float:
    labels = {"tenant": tenant, "provider": "openai", "channel": channel, "outcome": outcome}
    return _sample(GATEWAY_CALLS, "gatehouse_llm_gateway_calls_total", labels)


def _tokens(tenant: str, direction: str) -> float:
    labels = {"tenant": tenant, "provider": "openai", "direction": direction}
    return _sample(GATEWAY_TOKENS, "gatehouse_llm_gateway_tokens_total", labels)


async def test_an_answer_comes_back_with_its_usage_cost_and_record(caller, stored_openai, llm_script):
    llm_script({"gateway": "A gateway in front of MCP servers."})
    before_ok, before_prompt = _calls(caller.tenant_slug, "ok"), _tokens(caller.tenant_slug, "prompt")
    cost_labels = {"tenant": caller.tenant_slug, "provider": "openai"}
    before_cost = _sample(GATEWAY_COST, "gatehouse_llm_gateway_cost_usd_total", cost_labels)
    duration_labels = {"provider": "openai", "channel": "api"}
    before_timed = _sample(
        GATEWAY_DURATION, "gatehouse_llm_gateway_call_duration_seconds_count", duration_labels
    )

    response = await llm_gateway_invoke(
        identity=caller, request=invoke_request(), header_key=None, channel="api"
    )

    assert response.output == "A gateway in front of MCP servers."
    assert (response.provider, response.model) == ("openai", "gpt-4o-mini")
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens > 0
    assert response.cost is not None
    assert response.cost > 0
    usage = await LlmUsage.objects.aget(pk=response.id)
    assert usage.outcome == UsageOutcome.OK
    assert (usage.tenant_id, usage.user_id, usage.application_id) == (
        caller.tenant_id,
        caller.user_id,
        caller.application_id,
    )
    assert (usage.channel, usage.provider, usage.model, usage.key_source) == (
        "api",
        "openai",
        "gpt-4o-mini",
        "stored",
    )
    assert usage.total_tokens == response.usage.total_tokens
    assert float(usage.cost or 0) == pytest.approx(response.cost)
    assert _calls(caller.tenant_slug, "ok") == before_ok + 1
    assert _tokens(caller.tenant_slug, "prompt") == before_prompt + response.usage.prompt_tokens
    assert _sample(GATEWAY_COST, "gatehouse_llm_gateway_cost_usd_total", cost_labels) == pytest.approx(
        before_cost + response.cost
    )
    assert (
        _sample(GATEWAY_DURATION, "gatehouse_llm_gateway_call_duration_seconds_count", duration_labels)
        == before_timed + 1
    )


async def test_a_configured_model_is_called_by_its_name(caller, stored_openai, llm_script):
    llm_script({"gateway": "Hello."})

    response = await llm_gateway_invoke(
        identity=caller, request=invoke_request(model="Fast"), header_key=None, channel="mcp"
    )

    assert response.model == "gpt-4o-mini"
    usage = await LlmUsage.objects.aget(pk=response.id)
    assert (usage.channel, usage.model) == ("mcp", "gpt-4o-mini")


async def test_a_json_answer_comes_back_parsed_and_prose_as_text(caller, stored_openai, llm_script):
    llm_script({"gateway": ['{"answer": 42}', "42", "{not json"]})

    outputs = [
        (
            await llm_gateway_invoke(
                identity=caller, request=invoke_request(), header_key=None, channel="api"
            )
        ).output
        for _ in range(3)
    ]

    assert outputs == [{"answer": 42}, "42", "{not json"]


async def test_a_provider_failure_is_recorded_as_an_error_with_its_code(caller, stored_openai, llm_script):
    llm_script({"gateway": {"error": "RateLimitError"}})
    before = _calls(caller.tenant_slug, "error")

    with pytest.raises(UpstreamRateLimited):
        await llm_gateway_invoke(identity=caller, request=invoke_request(), header_key=None, channel="api")

    usage = await LlmUsage.objects.aget()
    assert (usage.outcome, usage.error_code) == (UsageOutcome.ERROR, "provider_rate_limited")
    assert _calls(caller.tenant_slug, "error") == before + 1


async def test_a_spent_budget_is_recorded_as_refused(caller, stored_openai, llm_script):
    llm_script({"gateway": "never sent"})
    await LlmBudget.objects.acreate(tenant_id=caller.tenant_id, period="day", max_tokens=0)
    before = _calls(caller.tenant_slug, "refused")

    with pytest.raises(BudgetExceeded):
        await llm_gateway_invoke(identity=caller, request=invoke_request(), header_key=None, channel="api")

    usage = await LlmUsage.objects.aget()
    assert (usage.outcome, usage.error_code, usage.total_tokens) == (
        UsageOutcome.REFUSED,
        "budget_exceeded",
        0,
    )
    assert _calls(caller.tenant_slug, "refused") == before + 1


async def test_no_key_at_all_is_recorded_as_not_configured(caller, llm_script):
    llm_script({"gateway": "never sent"})

    with pytest.raises(NotReady) as refused:
        await llm_gateway_invoke(identity=caller, request=invoke_request(), header_key=None, channel="api")

    assert refused.value.api_code == "not_configured"
    assert "openai" in refused.value.message
    usage = await LlmUsage.objects.aget()
    assert (usage.outcome, usage.error_code) == (UsageOutcome.ERROR, "not_configured")


async def test_log_lines_name_the_call_but_never_the_prompt_answer_or_key(
    caller, stored_openai, llm_script, caplog
):
    llm_script({"gateway": ["The answer-marker text.", {"error": "AuthenticationError"}]})
    request = invoke_request(messages=[{"role": "user", "content": PROMPT}])

    with caplog.at_level(logging.INFO, logger="gatehouse"):
        response = await llm_gateway_invoke(
            identity=caller, request=request, header_key=HEADER_KEY, channel="api"
        )
        with pytest.raises(UpstreamRefused):
            await llm_gateway_invoke(identity=caller, request=request, header_key=HEADER_KEY, channel="api")

    events = [
        getattr(record, "event", None) for record in caplog.records if record.name == "gatehouse.llm_gateway"
    ]
    assert events == [
        "model_request_started",
        "model_response_received",
        "model_request_started",
        "model_request_error",
    ]
    received = next(r for r in caplog.records if getattr(r, "event", None) == "model_response_received")
    assert (received.provider, received.model, received.tenant) == (
        "openai",
        "gpt-4o-mini",
        caller.tenant_slug,
    )
    assert received.total_tokens == response.usage.total_tokens
    error = next(r for r in caplog.records if getattr(r, "event", None) == "model_request_error")
    assert error.code == "provider_refused"
    everything = caplog.text + repr([record.__dict__ for record in caplog.records])
    for secret in (HEADER_KEY, STORED_KEY, "secret-prompt-marker", "answer-marker"):
        assert secret not in everything


async def test_a_header_key_is_used_and_found_in_no_usage_row(caller, stored_openai, llm_script):
    llm_script({"gateway": "Hello."})

    response = await llm_gateway_invoke(
        identity=caller, request=invoke_request(), header_key=HEADER_KEY, channel="api"
    )

    usage = await LlmUsage.objects.aget(pk=response.id)
    assert usage.key_source == "header"
    rows = [row async for row in LlmUsage.objects.values()]
    assert HEADER_KEY not in repr(rows)


async def test_a_call_with_tools_logs_the_seeds_events_without_the_tools_arguments(
    caller, stored_openai, llm_script, caplog
):
    """The seed's events, as structured log lines: the tools bound, each round's tool calls, each
    tool's start and its end or error, and a structured answer asked for."""
    llm_script(
        {
            "gateway": [
                {"toolCalls": [{"name": "whoami", "arguments": {"note": "argument-marker"}}]},
                {"toolCalls": [{"name": "whoami", "arguments": {}}]},
                '{"who": "the caller"}',
            ]
        }
    )
    answers = iter([ToolAnswer(outcome="ok", text="you"), ToolAnswer(outcome="error", text="x", message="x")])

    async def run(name: str, arguments: dict[str, Any]) -> ToolAnswer:
        return next(answers)

    schema = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}
    request = invoke_request(mcp={"tools": ["whoami"]}, response_schema=schema)
    # whoami is in the account toolset, for mcp:read.
    reader = dataclasses.replace(caller, scopes=caller.scopes | {"mcp:read"})
    with caplog.at_level(logging.INFO, logger="gatehouse"):
        response = await llm_gateway_invoke(
            identity=reader, request=request, header_key=None, channel="api", run_tool=run
        )

    assert response.output == {"who": "the caller"}
    assert [(c.name, c.outcome) for c in response.tool_calls or []] == [("whoami", "ok"), ("whoami", "error")]
    logged = [r for r in caplog.records if r.name == "gatehouse.llm_gateway"]
    events = [getattr(r, "event", None) for r in logged]
    for event in (
        "structured_output_requested",
        "tools_bound",
        "model_tool_calls_detected",
        "tool_execution_started",
        "tool_execution_finished",
        "tool_execution_error",
    ):
        assert event in events, events
    bound = next(r for r in logged if getattr(r, "event", None) == "tools_bound")
    assert (bound.tools, bound.tenant) == (["whoami"], caller.tenant_slug)
    failed = next(r for r in logged if getattr(r, "event", None) == "tool_execution_error")
    assert (failed.tool, failed.outcome) == ("whoami", "error")
    assert "argument-marker" not in caplog.text + repr([r.__dict__ for r in logged])
