"""The LLM script player, for tests of the code that calls the model: a fixture writing the script
(``GATEHOUSE["LLM_MOCK_RESPONSES_FILE"]`` points at it) and a model configuration.

Every call runs litellm's real code path and answers through its ``mock_response`` and
``mock_tool_calls``: no network.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from language_models.governed import Feature, ModelUse
from language_models.governed import call as governed_call
from language_models.selectors import ModelConfig
from tests.support.identities import ALICE

API_KEY = "sk-test-never-shown-0123456789"


def model_config(**overrides: Any) -> ModelConfig:
    values: dict[str, Any] = {
        "model": "openai/gpt-4o-mini",
        "api_key": API_KEY,
        "api_base": None,
        "temperature": 0.0,
        "max_output_tokens": 200,
        "timeout_seconds": 10.0,
        **overrides,
    }
    return ModelConfig(**values)


@pytest.fixture
def llm_script(tmp_path, settings) -> Callable[[dict[str, Any]], Path]:
    """Writes the script the calls answer from, ``{purpose: entry}``; returns its path."""
    path = tmp_path / "llm-script.json"
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(path)}

    def write(responses: dict[str, Any]) -> Path:
        path.write_text(json.dumps({"responses": responses}))
        return path

    return write


def script_remaining(path: Path, purpose: str) -> Any:
    """What the script still holds for ``purpose`` (a list's consumed items are gone)."""
    return json.loads(path.read_text())["responses"][purpose]


# Whose calls the unit tests of a feature's logic make (no rows behind it: see below).
UNRECORDED_USE = ModelUse(identity=ALICE, feature=Feature.ASK_QUESTION)


@pytest.fixture
def unrecorded_model_calls(monkeypatch) -> ModelUse:
    """Model calls without the governed path's bookkeeping (rate limit, budgets, usage record,
    audit row), for the unit tests of what a feature does with the model's answers: their caller
    has no rows to record against. The bookkeeping is tested in tests/language_models/ and, for
    every feature, end to end (tests/e2e/language_models/)."""

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(governed_call, "_begin", nothing)
    monkeypatch.setattr(governed_call, "_end", nothing)
    return UNRECORDED_USE
