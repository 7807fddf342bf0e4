from __future__ import annotations

from django.apps import AppConfig


class LanguageModelsConfig(AppConfig):
    name = "language_models"
    verbose_name = "Language models"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the deploy check that refuses a scripted (mock) model in production.
        import language_models.checks  # noqa: F401
