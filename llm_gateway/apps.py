from __future__ import annotations

from django.apps import AppConfig


class LlmGatewayConfig(AppConfig):
    name = "llm_gateway"
    verbose_name = "LLM gateway"
