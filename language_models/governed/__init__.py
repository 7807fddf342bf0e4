"""The one governed path of every model call of the platform (``call.model_call``): rate limit,
budgets with a reservation per call, the completion, usage record and audit row. Other apps call
models only through this package (an import-linter contract keeps ``language_models.completion``
and litellm out of their reach)."""

from language_models.completion import Completion, ToolCall, ToolCompletion
from language_models.governed.call import (
    GovernedCall,
    ModelUse,
    model_call,
    model_complete,
    model_complete_tools,
)
from language_models.models import Feature

__all__ = [
    "Completion",
    "Feature",
    "GovernedCall",
    "ModelUse",
    "ToolCall",
    "ToolCompletion",
    "model_call",
    "model_complete",
    "model_complete_tools",
]
