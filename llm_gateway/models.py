"""The LLM gateway keeps nothing of its own: budgets and usage records are every model call's, so
they live with the governed path in ``language_models`` (``language_models.models``)."""

from __future__ import annotations

from llm_gateway import scopes  # noqa: F401  (registers the scope with the app)
