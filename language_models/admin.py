"""Operators give each tenant its language model; the API key is write-only.

The model string is checked as ``preflight`` checks ``DEMO_LLM_MODEL`` (``language_models.model_checks``),
so a string litellm cannot route is refused here with the same message. A key missing from both the
form and the server's environment is not refused (the variable may be set before the next call) but
said at once, rather than at the tenant's first question.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import ThreadSensitiveContext, async_to_sync
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from core.crypto import secret_encrypt
from core.errors import GatehouseError
from core.identity import Identity
from language_models.governed import Completion, Feature, ModelUse, model_complete
from language_models.model_checks import (
    ModelKeyMissing,
    ModelStringInvalid,
    language_model_key_check,
    language_model_string_validate,
)
from language_models.models import API_BASE_HELP, LanguageModel
from language_models.selectors import ModelConfig

KEY_STORED = "Stored encrypted; never shown. Enter a new key to replace it."
KEY_NONE = "None stored: litellm reads the provider's usual environment variable (OPENAI_API_KEY...)."
KEY_HELP = (
    "Leave blank to keep the stored key (or, for a new model, to use the provider's environment variable)."
)
KEY_BOTH = "Enter a new key or remove the stored one, not both."
TEST_PROMPT = [{"role": "user", "content": "Reply with the single word OK."}]
TEST_PURPOSE = "admin_test"
TEST_PASSED = "{name}: {model} answered {text!r} ({tokens} tokens)."
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
        return cleaned


@admin.register(LanguageModel)
class LanguageModelAdmin(admin.ModelAdmin):
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
        if form.cleaned_data.get("api_key"):
            obj.api_key_encrypted = secret_encrypt(plaintext=form.cleaned_data["api_key"])
        elif form.cleaned_data.get("remove_api_key"):
            obj.api_key_encrypted = ""
        super().save_model(request, obj, form, change)
        if not obj.api_key_encrypted:
            self._missing_key_note(request, obj)

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
            try:
                config = ModelConfig.from_language_model(language_model)
                completion = async_to_sync(_model_test)(
                    use=_operator_use(request, language_model), config=config
                )
            except GatehouseError as error:
                self.message_user(
                    request,
                    TEST_FAILED.format(name=language_model.name, message=error.message),
                    messages.ERROR,
                )
                continue
            self.message_user(
                request,
                TEST_PASSED.format(
                    name=language_model.name,
                    model=completion.model,
                    text=completion.text[:200],
                    tokens=completion.prompt_tokens + completion.completion_tokens,
                ),
                messages.SUCCESS,
            )


def _operator_use(request: HttpRequest, language_model: LanguageModel) -> ModelUse:
    """The operator testing a tenant's model: the call counts against that tenant's budgets and is
    recorded as its usage (feature ``model_test``), as every model call is."""
    tenant = language_model.tenant
    identity = Identity(
        user_id=request.user.pk or 0,
        username=request.user.get_username(),
        tenant_id=tenant.pk,
        tenant_slug=tenant.slug,
        tenant_name=tenant.name,
        role="operator",
        scopes=frozenset(),
        application_id=0,
        client_id="admin",
        client_name="Django admin",
        token_id=0,
    )
    return ModelUse(identity=identity, feature=Feature.MODEL_TEST, channel="admin")


async def _model_test(*, use: ModelUse, config: ModelConfig) -> Completion:
    # The governed path's database work runs on threads of its own (core.db.db_call), never on
    # this request's thread, whose connection it would otherwise close mid-request.
    async with ThreadSensitiveContext():
        return await model_complete(use=use, config=config, messages=TEST_PROMPT, purpose=TEST_PURPOSE)
