"""What the pipeline's tests share: the LLM script player, for the model that calls tools."""

from tests.support.llm_script_support import llm_script  # noqa: F401  (a fixture)
