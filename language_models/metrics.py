"""Language model calls and tokens, counted per model and purpose for ``/metrics``.

``gatehouse_llm_calls_total{model,purpose,outcome}`` and ``gatehouse_llm_tokens_total{model,purpose,
direction}``; the exposition (and multiprocess mode) is ``core.metrics``'s.
"""

from __future__ import annotations

from prometheus_client import Counter

LLM_CALLS = Counter(
    "gatehouse_llm_calls", "Language model calls, by outcome (ok or error).", ["model", "purpose", "outcome"]
)
LLM_TOKENS = Counter(
    "gatehouse_llm_tokens",
    "Tokens sent to (prompt) and received from (completion) language models.",
    ["model", "purpose", "direction"],
)


def metrics_llm_call(
    *, model: str, purpose: str, outcome: str, prompt_tokens: int = 0, completion_tokens: int = 0
) -> None:
    """Count one language model call. Model strings come from operators, so the label set stays small."""
    LLM_CALLS.labels(model, purpose, outcome).inc()
    if prompt_tokens:
        LLM_TOKENS.labels(model, purpose, "prompt").inc(prompt_tokens)
    if completion_tokens:
        LLM_TOKENS.labels(model, purpose, "completion").inc(completion_tokens)
