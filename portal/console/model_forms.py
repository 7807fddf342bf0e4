"""The models and budgets section's forms: they only turn posted text into typed values (a number
that is none, NaN or Infinity is refused here, in the service's own words); every rule of what may
be stored is ``language_models.services``'."""

from __future__ import annotations

from collections.abc import Iterable

from django import forms

from accounts.models import Membership, Tenant
from language_models.models import BudgetPeriod
from language_models.services import (
    API_KEY_MAX_LENGTH,
    COST_INVALID,
    KEY_TOO_LONG,
    NAME_MAX_LENGTH,
    PERSON_NOT_MEMBER,
    PRICE_INVALID,
    TOKENS_INVALID,
    TOKENS_MOST,
)

# The columns' limits, as the service's refusals say them.
_PRICE_INVALID = PRICE_INVALID.format(most="999999.999999", places=6)
_COST_INVALID = COST_INVALID.format(most="99999999.9999", places=4)


def _price(label: str) -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        required=False,
        error_messages={"invalid": _PRICE_INVALID},
        widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off"}),
        help_text="US dollars per million tokens; blank for litellm's own price.",
    )


class LanguageModelForm(forms.Form):
    model_id = forms.CharField(required=False, widget=forms.HiddenInput)
    name = forms.CharField(label="Name", widget=forms.TextInput(attrs={"maxlength": NAME_MAX_LENGTH}))
    model = forms.CharField(
        label="Model string",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text="provider/model, such as openai/gpt-4o-mini or anthropic/claude-sonnet-4-5.",
    )
    # Write-only: never rendered back, not even after a refusal.
    api_key = forms.CharField(
        label="API key",
        required=False,
        max_length=API_KEY_MAX_LENGTH,
        error_messages={"max_length": KEY_TOO_LONG},
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted, never shown. Blank keeps the stored key.",
    )
    remove_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    is_default = forms.BooleanField(label="The tenant's default model", required=False)
    input_price_per_million = _price("Input price")
    output_price_per_million = _price("Output price")


class BudgetForm(forms.Form):
    budget_id = forms.CharField(required=False, widget=forms.HiddenInput)
    person = forms.ChoiceField(label="Who", required=False)
    period = forms.ChoiceField(label="Period", choices=BudgetPeriod.choices)
    max_tokens = forms.IntegerField(
        label="Token limit",
        required=False,
        error_messages={"invalid": TOKENS_INVALID.format(most=TOKENS_MOST)},
        widget=forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "off"}),
    )
    max_cost = forms.DecimalField(
        label="Cost limit (US dollars)",
        required=False,
        error_messages={"invalid": _COST_INVALID},
        widget=forms.TextInput(attrs={"inputmode": "decimal", "autocomplete": "off"}),
    )

    def __init__(
        self, *args: object, tenant: Tenant, members: Iterable[Membership], **kwargs: object
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        person = self.fields["person"]
        assert isinstance(person, forms.ChoiceField)
        person.choices = [("", "The whole tenant")] + [
            (str(m.user_id), m.user.display_name or m.user.get_username()) for m in members
        ]
        person.error_messages["invalid_choice"] = PERSON_NOT_MEMBER.format(tenant=tenant.name)

    def person_id(self) -> int | None:
        chosen = self.cleaned_data.get("person") or ""
        return int(chosen) if chosen else None
