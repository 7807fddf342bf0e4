"""Operators give each tenant its language model; the API key is write-only.

Every change is the console's service call (``language_models.services``: ``language_model_save``
and ``language_model_delete``), so it is checked the same way and audited as ``model.changed`` with
the operator's name, never the key. The model string is checked as ``preflight`` checks
``DEMO_LLM_MODEL`` (``language_models.model_checks``), so a string litellm cannot route is refused
here with the same message. A key missing from both the form and the server's environment is not
refused (the variable may be set before the next call) but said at once, rather than at the
tenant's first question. *Test the model* is the console's test call (``language_models.model_test``).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.service_admin import ServiceAdmin, admin_object_adopt, admin_operator
from core.errors import InvalidInput
from language_models.model_checks import (
    ModelKeyMissing,
    ModelStringInvalid,
    language_model_key_check,
    language_model_string_validate,
)
from language_models.model_test import language_model_test
from language_models.models import API_BASE_HELP, LanguageModel
from language_models.services import (
    ModelTuning,
    language_model_delete,
    language_model_input_check,
    language_model_save,
)

KEY_STORED = "Stored encrypted; never shown. Enter a new key to replace it."
KEY_NONE = "None stored: litellm reads the provider's usual environment variable (OPENAI_API_KEY...)."
KEY_HELP = (
    "Leave blank to keep the stored key (or, for a new model, to use the provider's environment variable)."
)
KEY_BOTH = "Enter a new key or remove the stored one, not both."
TEST_PASSED = "{name}: {model} answered {text!r} ({tokens} tokens, {latency_ms} ms)."
TEST_FAILED = "{name}: {message}"
KEY_MISSING_NOW = "{name} is saved, but its calls fail until this is fixed: {message}"


# The model's own fields, in the order the change page shows them around the write-only key.
FIELDS_BEFORE_KEY = ["tenant", "name", "model"]
FIELDS_AFTER_KEY = [
    "api_base",
    "is_default",
    "temperature",
    "max_output_tokens",
    "request_timeout_seconds",
    "input_price_per_million",
    "output_price_per_million",
]


class LanguageModelForm(forms.ModelForm):
    # Write-only: the stored key is never rendered back, not even in the password box.
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=KEY_HELP,
    )
    remove_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    # Declared for assume_scheme: a bare host is read as https, as Django 6 will by default.
    api_base = forms.URLField(
        label="API base URL", required=False, max_length=200, assume_scheme="https", help_text=API_BASE_HELP
    )

    class Meta:
        model = LanguageModel
        fields = [*FIELDS_BEFORE_KEY, *FIELDS_AFTER_KEY]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and "tenant" in self.fields:
            # A model (and its key) stays in its tenant: the services change a tenant's own models.
            # Disabled, not read-only, so the name's uniqueness in the tenant is still checked here.
            self.fields["tenant"].disabled = True

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("api_key") and cleaned.get("remove_api_key"):
            self.add_error("remove_api_key", KEY_BOTH)
        # Only a model string the field itself accepted (length, NUL) is put to litellm.
        if cleaned.get("model") and "model" not in self.errors:
            try:
                language_model_string_validate(model=cleaned["model"], api_base=cleaned.get("api_base"))
            except ModelStringInvalid as refusal:
                self.add_error("model", refusal.message)
        self._service_check(cleaned)
        return cleaned

    def _service_check(self, cleaned: dict[str, Any]) -> None:
        """What the save's service would refuse, beside its field now rather than as an error page."""
        if self.errors:
            return
        try:
            cleaned["name"] = language_model_input_check(
                name=cleaned.get("name") or "",
                api_key=cleaned.get("api_key") or "",
                remove_api_key=bool(cleaned.get("remove_api_key")),
                input_price_per_million=cleaned.get("input_price_per_million"),
                output_price_per_million=cleaned.get("output_price_per_million"),
            )
        except InvalidInput as refusal:
            field = (refusal.data or {}).get("field")
            self.add_error(field if field in self.fields else None, refusal.message)


@admin.register(LanguageModel)
class LanguageModelAdmin(ServiceAdmin):
    form = LanguageModelForm
    list_display = ["name", "tenant", "model", "is_default", "updated"]
    list_filter = ["tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name", "model"]
    readonly_fields = ["key_status", "created", "updated"]
    actions = ["test_model"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        key = ["key_status", "api_key", "remove_api_key"] if obj else ["api_key"]
        return [*FIELDS_BEFORE_KEY, *key, *FIELDS_AFTER_KEY, *(["created", "updated"] if obj else [])]

    @admin.display(description="Stored API key")
    def key_status(self, language_model: LanguageModel) -> str:
        return KEY_STORED if language_model.api_key_encrypted else KEY_NONE

    def save_model(self, request: HttpRequest, obj: LanguageModel, form: Any, change: bool) -> None:
        data = form.cleaned_data
        saved = language_model_save(
            by=admin_operator(request),
            tenant=obj.tenant,
            model_id=obj.pk if change else None,
            name=data["name"],
            model=data["model"],
            api_key=data.get("api_key") or "",
            remove_api_key=bool(data.get("remove_api_key")),
            is_default=data["is_default"],
            input_price_per_million=data["input_price_per_million"],
            output_price_per_million=data["output_price_per_million"],
            tuning=ModelTuning(
                api_base=data["api_base"] or "",
                temperature=data["temperature"],
                max_output_tokens=data["max_output_tokens"],
                request_timeout_seconds=data["request_timeout_seconds"],
            ),
        )
        admin_object_adopt(obj, saved)
        if not obj.api_key_encrypted:
            self._missing_key_note(request, obj)

    def delete_model(self, request: HttpRequest, obj: LanguageModel) -> None:
        language_model_delete(by=admin_operator(request), tenant=obj.tenant, model_id=obj.pk)

    def _missing_key_note(self, request: HttpRequest, obj: LanguageModel) -> None:
        try:
            provider = language_model_string_validate(model=obj.model, api_base=obj.api_base or None)
            language_model_key_check(model=obj.model, provider=provider, api_key=None, api_base=obj.api_base)
        except (ModelStringInvalid, ModelKeyMissing) as problem:
            self.message_user(
                request, KEY_MISSING_NOW.format(name=obj.name, message=problem.message), messages.WARNING
            )

    @admin.action(description="Test the model (a one-word prompt)", permissions=["change"])
    def test_model(self, request: HttpRequest, queryset: QuerySet[LanguageModel]) -> None:
        for language_model in queryset.select_related("tenant"):
            result = language_model_test(model=language_model, by=admin_operator(request), channel="admin")
            if not result.ok:
                message = TEST_FAILED.format(name=language_model.name, message=result.error)
                self.message_user(request, message, messages.ERROR)
                continue
            message = TEST_PASSED.format(
                name=language_model.name,
                model=result.model,
                text=result.reply,
                tokens=result.tokens,
                latency_ms=result.latency_ms,
            )
            self.message_user(request, message, messages.SUCCESS)
