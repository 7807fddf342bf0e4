"""``manage.py check --deploy``: a scripted language model must never reach a deployment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, Tags, register

from core.conf import gatehouse_settings

MOCK_RESPONSES_IN_DEPLOYMENT = (
    "LLM_MOCK_RESPONSES_FILE is set: every language model call answers from a test script instead "
    "of the configured model."
)
MOCK_RESPONSES_HINT = "Unset LLM_MOCK_RESPONSES_FILE; it is for tests only."


@register(Tags.security, deploy=True)
def llm_mock_responses_check(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[CheckMessage]:
    if gatehouse_settings.LLM_MOCK_RESPONSES_FILE:
        return [Error(MOCK_RESPONSES_IN_DEPLOYMENT, hint=MOCK_RESPONSES_HINT, id="language_models.E001")]
    return []
