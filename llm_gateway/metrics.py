"""The gateway's calls, tokens, cost and time, per tenant and provider, for ``/metrics``.

``gatehouse_llm_gateway_calls_total{tenant,provider,channel,outcome}``,
``gatehouse_llm_gateway_tokens_total{tenant,provider,direction}``,
``gatehouse_llm_gateway_cost_usd_total{tenant,provider}`` and the histogram
``gatehouse_llm_gateway_call_duration_seconds{provider,channel}``. They mirror the usage records
(``llm_gateway.usage`` counts each record it writes), which stay the source of truth for budgets.

Defined at import like ``language_models.metrics``; the exposition, and the multiprocess mode that
sums several workers' counters, are ``core.metrics``'s. Labels stay few: tenants and providers are
operators' (a provider is only counted once litellm knows it), channel is ``api`` or ``mcp``.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

GATEWAY_CALLS = Counter(
    "gatehouse_llm_gateway_calls",
    "LLM gateway calls past validation, by outcome (ok, error, refused).",
    ["tenant", "provider", "channel", "outcome"],
)
GATEWAY_TOKENS = Counter(
    "gatehouse_llm_gateway_tokens",
    "Tokens sent (prompt) and received (completion) through the LLM gateway.",
    ["tenant", "provider", "direction"],
)
GATEWAY_COST = Counter(
    "gatehouse_llm_gateway_cost_usd",
    "What the LLM gateway's calls cost, in US dollars, as litellm prices them.",
    ["tenant", "provider"],
)
GATEWAY_DURATION = Histogram(
    "gatehouse_llm_gateway_call_duration_seconds",
    "Time the LLM gateway's calls took, provider included.",
    ["provider", "channel"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300),
)


def metrics_gateway_call(
    *,
    tenant: str,
    provider: str,
    channel: str,
    outcome: str,
    prompt_tokens: int,
    completion_tokens: int,
    cost: float | None,
    duration_seconds: float,
) -> None:
    """Count one gateway call (its usage record has been written)."""
    GATEWAY_CALLS.labels(tenant, provider, channel, outcome).inc()
    if prompt_tokens:
        GATEWAY_TOKENS.labels(tenant, provider, "prompt").inc(prompt_tokens)
    if completion_tokens:
        GATEWAY_TOKENS.labels(tenant, provider, "completion").inc(completion_tokens)
    if cost:
        GATEWAY_COST.labels(tenant, provider).inc(cost)
    if outcome != "refused":
        GATEWAY_DURATION.labels(provider, channel).observe(duration_seconds)
