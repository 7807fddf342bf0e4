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

from language_models.selectors import ModelConfig

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
