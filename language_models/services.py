"""Writes to a tenant's language models and budgets.

``language_model_save`` and ``llm_budget_save`` are what the console's forms call (and what any
other writer should): each checks what it is given whatever parsed it (a name a reader can see,
a model string litellm routes, prices and limits the columns hold), refuses with ``InvalidInput``
naming the field, and records an audit row in the same transaction. A key is only ever stored
encrypted, and neither it nor its length reaches an audit row or a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction

from accounts.models import Membership, Tenant, User
from core.audit.trail import audit_record
from core.crypto import secret_encrypt
from core.errors import InvalidInput
from core.models import AuditAction
from core.text_safety import text_invisible_character
from language_models.model_checks import ModelStringInvalid, language_model_string_validate
from language_models.models import BudgetPeriod, LanguageModel, LlmBudget
from language_models.selectors import language_model_get_for_tenant, llm_budget_get_for_tenant

NAME_MAX_LENGTH = LanguageModel._meta.get_field("name").max_length or 100
API_KEY_MAX_LENGTH = 4096
NAME_EMPTY = "Give the model a name, such as Main."
NAME_TOO_LONG = f"A name has at most {NAME_MAX_LENGTH} characters."
NAME_INVISIBLE = "The name contains an invisible or control character ({code}). Type it again."
NAME_TAKEN = "This tenant already has a model called {name}."
KEY_INVISIBLE = "The API key contains a space, an invisible or a control character. Paste it again."
KEY_TOO_LONG = f"An API key has at most {API_KEY_MAX_LENGTH} characters."
KEY_BOTH = "Enter a new key or remove the stored one, not both."
PRICE_INVALID = "A price is a number of US dollars from 0 to {most}, with at most {places} decimals."
PERIOD_UNKNOWN = "The period is day or month."
NO_LIMIT = "Set a token limit, a cost limit, or both."
TOKENS_INVALID = "A token limit is a whole number from 0 to {most}."
COST_INVALID = "A cost limit is a number of US dollars from 0 to {most}, with at most {places} decimals."
PERSON_NOT_MEMBER = "Choose a member of {tenant}, or nobody for the whole tenant."
BUDGET_TAKEN_TENANT = "{tenant} already has a budget per {period}: change that one."
BUDGET_TAKEN_PERSON = "{person} already has a budget per {period}: change that one."

TOKENS_MOST = 2**63 - 1


@transaction.atomic
def language_model_ensure_default(*, tenant: Tenant, name: str, model: str) -> LanguageModel:
    """Create or update the tenant's model called ``name`` and make it the default.

    Its stored API key, if any, is kept; without one, litellm reads the provider's usual
    environment variable (OPENAI_API_KEY, ANTHROPIC_API_KEY...).
    """
    # The previous default steps down first: the database allows one default per tenant.
    LanguageModel.objects.filter(tenant=tenant, is_default=True).exclude(name=name).update(is_default=False)
    language_model, _ = LanguageModel.objects.update_or_create(
        tenant=tenant, name=name, defaults={"model": model, "is_default": True}
    )
    return language_model


@dataclass(frozen=True)
class ModelTuning:
    """What only operators set (the Django admin): the base URL, temperature, output limit and
    timeout. A save without it keeps the stored values (the console's)."""

    api_base: str
    temperature: float
    max_output_tokens: int
    request_timeout_seconds: int


def language_model_input_check(
    *,
    name: str,
    api_key: str,
    remove_api_key: bool,
    input_price_per_million: Decimal | None,
    output_price_per_million: Decimal | None,
) -> str:
    """The name as ``language_model_save`` stores it, once what it would refuse of these values
    alone is known to be fine; ``InvalidInput`` naming the field otherwise. A form calls it to show
    the refusal beside its field (the admin's); the save checks again, and then the name is free."""
    name = _name_clean(name)
    if api_key and remove_api_key:
        raise InvalidInput(KEY_BOTH, data={"field": "api_key"})
    _key_check(api_key)
    _decimal_clean(input_price_per_million, "input_price_per_million")
    _decimal_clean(output_price_per_million, "output_price_per_million")
    return name


def language_model_save(
    *,
    by: User,
    tenant: Tenant,
    model_id: object | None,
    name: str,
    model: str,
    api_key: str,
    remove_api_key: bool,
    is_default: bool,
    input_price_per_million: Decimal | None,
    output_price_per_million: Decimal | None,
    tuning: ModelTuning | None = None,
) -> LanguageModel:
    """Add a model to ``tenant`` (``model_id`` None) or change its model ``model_id``.

    A blank ``api_key`` keeps the stored key; ``remove_api_key`` drops it (litellm then reads the
    provider's environment variable). The base URL, temperature and limits change only with
    ``tuning`` (the operators'). The audit row names what changed of those, never their values
    (a base URL may carry credentials), nor anything of the key but whether it changed.
    """
    name = language_model_input_check(
        name=name,
        api_key=api_key,
        remove_api_key=remove_api_key,
        input_price_per_million=input_price_per_million,
        output_price_per_million=output_price_per_million,
    )
    prices = {
        "input_price_per_million": input_price_per_million,
        "output_price_per_million": output_price_per_million,
    }
    with transaction.atomic():
        if model_id is None:
            language_model = LanguageModel(tenant=tenant)
        else:
            language_model = language_model_get_for_tenant(tenant=tenant, model_id=model_id)
        tuned = _tune(language_model, tuning)
        try:
            language_model_string_validate(model=model, api_base=language_model.api_base or None)
        except ModelStringInvalid as refusal:
            raise InvalidInput(refusal.message, data={"field": "model"}) from None
        if LanguageModel.objects.filter(tenant=tenant, name=name).exclude(pk=language_model.pk).exists():
            raise InvalidInput(NAME_TAKEN.format(name=name), data={"field": "name"})
        change = "added" if language_model.pk is None else "changed"
        key = "kept" if language_model.api_key_encrypted else "none"
        if api_key:
            language_model.api_key_encrypted, key = secret_encrypt(plaintext=api_key), "replaced"
        elif remove_api_key:
            language_model.api_key_encrypted, key = "", "removed"
        language_model.name, language_model.model, language_model.is_default = name, model, is_default
        for field, value in prices.items():
            setattr(language_model, field, value)
        if is_default:
            # The previous default steps down first: the database allows one default per tenant.
            LanguageModel.objects.filter(tenant=tenant, is_default=True).exclude(pk=language_model.pk).update(
                is_default=False
            )
        try:
            with transaction.atomic():
                language_model.save()
        except IntegrityError:
            # Another admin took the name between the check and the save.
            raise InvalidInput(NAME_TAKEN.format(name=name), data={"field": "name"}) from None
        audit_record(
            action=AuditAction.MODEL_CHANGED,
            user=by,
            tenant=tenant,
            target=language_model.name,
            detail={
                "change": change,
                "model_id": language_model.pk,
                "model": language_model.model,
                "key": key,
                "default": is_default,
                **{field: None if value is None else str(value) for field, value in prices.items()},
                **({"tuning": tuned} if tuned else {}),
            },
        )
    return language_model


@transaction.atomic
def language_model_delete(*, by: User, tenant: Tenant, model_id: object) -> LanguageModel:
    """Remove ``tenant``'s model ``model_id``; its usage records stay (they name the model as text)."""
    language_model = language_model_get_for_tenant(tenant=tenant, model_id=model_id)
    removed_id = language_model.pk
    language_model.delete()
    audit_record(
        action=AuditAction.MODEL_CHANGED,
        user=by,
        tenant=tenant,
        target=language_model.name,
        detail={"change": "removed", "model_id": removed_id, "model": language_model.model},
    )
    return language_model


def _budget_input_check(
    *,
    tenant: Tenant,
    budget_id: int | None,
    period: str,
    max_tokens: int | None,
    max_cost: Decimal | None,
    person_id: int | None,
) -> User | None:
    """The person the budget caps (None: the whole tenant), once what ``llm_budget_save`` would
    refuse of these values is known to be fine; ``InvalidInput`` naming the field otherwise."""
    if period not in BudgetPeriod.values:
        raise InvalidInput(PERIOD_UNKNOWN, data={"field": "period"})
    if max_tokens is None and max_cost is None:
        raise InvalidInput(NO_LIMIT, data={"field": "max_tokens"})
    if max_tokens is not None and not 0 <= max_tokens <= TOKENS_MOST:
        raise InvalidInput(TOKENS_INVALID.format(most=TOKENS_MOST), data={"field": "max_tokens"})
    _decimal_clean(max_cost, "max_cost")
    person = _member(tenant=tenant, person_id=person_id)
    taken = LlmBudget.objects.filter(tenant=tenant, period=period, user=person)
    if budget_id is not None:
        taken = taken.exclude(pk=budget_id)
    if taken.exists():
        raise InvalidInput(
            _budget_taken(tenant=tenant, person=person, period=period), data={"field": "period"}
        )
    return person


def llm_budget_save(
    *,
    by: User,
    tenant: Tenant,
    budget_id: object | None,
    period: str,
    max_tokens: int | None,
    max_cost: Decimal | None,
    person_id: int | None,
    note: str | None = None,
) -> LlmBudget:
    """Add a budget to ``tenant`` (``budget_id`` None) or change its budget ``budget_id``: per day
    or month, a token limit and/or a cost limit, for the whole tenant or one of its members.
    ``note`` (the operators') is kept when None."""
    with transaction.atomic():
        budget = (
            LlmBudget(tenant=tenant)
            if budget_id is None
            else llm_budget_get_for_tenant(tenant=tenant, budget_id=budget_id)
        )
        person = _budget_input_check(
            tenant=tenant,
            budget_id=budget.pk,
            period=period,
            max_tokens=max_tokens,
            max_cost=max_cost,
            person_id=person_id,
        )
        if note is not None:
            budget.note = note
        change = "added" if budget.pk is None else "changed"
        budget.period, budget.max_tokens, budget.max_cost, budget.user = period, max_tokens, max_cost, person
        try:
            with transaction.atomic():
                budget.save()
        except IntegrityError:
            raise InvalidInput(
                _budget_taken(tenant=tenant, person=person, period=period), data={"field": "period"}
            ) from None
        audit_record(
            action=AuditAction.BUDGET_CHANGED,
            user=by,
            tenant=tenant,
            target=_budget_target(budget),
            detail={"change": change, "budget_id": budget.pk, **_budget_detail(budget)},
        )
    return budget


@transaction.atomic
def llm_budget_delete(*, by: User, tenant: Tenant, budget_id: object) -> LlmBudget:
    budget = llm_budget_get_for_tenant(tenant=tenant, budget_id=budget_id)
    removed_id = budget.pk
    budget.delete()
    audit_record(
        action=AuditAction.BUDGET_CHANGED,
        user=by,
        tenant=tenant,
        target=_budget_target(budget),
        detail={"change": "removed", "budget_id": removed_id, **_budget_detail(budget)},
    )
    return budget


def _tune(language_model: LanguageModel, tuning: ModelTuning | None) -> list[str]:
    """Apply ``tuning`` to ``language_model``; the names of the fields it changed."""
    if tuning is None:
        return []
    changed = []
    for field, value in vars(tuning).items():
        if getattr(language_model, field) != value:
            setattr(language_model, field, value)
            changed.append(field)
    return changed


def _name_clean(name: str) -> str:
    name = name.strip()
    if not name:
        raise InvalidInput(NAME_EMPTY, data={"field": "name"})
    code = text_invisible_character(name)
    if code is not None:
        raise InvalidInput(NAME_INVISIBLE.format(code=code), data={"field": "name"})
    if len(name) > NAME_MAX_LENGTH:
        raise InvalidInput(NAME_TOO_LONG, data={"field": "name"})
    return name


def _key_check(api_key: str) -> None:
    # Never repeated in the message: the refusal must not echo what may be a real key.
    if len(api_key) > API_KEY_MAX_LENGTH:
        raise InvalidInput(KEY_TOO_LONG, data={"field": "api_key"})
    if api_key and (not api_key.isprintable() or any(c.isspace() for c in api_key)):
        raise InvalidInput(KEY_INVISIBLE, data={"field": "api_key"})


def _decimal_clean(value: Decimal | None, field: str) -> Decimal | None:
    """``value`` if the column ``field`` holds it exactly (finite, not negative, in its digits)."""
    if value is None:
        return None
    column: Any = (LlmBudget if field == "max_cost" else LanguageModel)._meta.get_field(field)
    places, most = column.decimal_places, Decimal(10) ** (column.max_digits - column.decimal_places)
    exponent = value.as_tuple().exponent
    if not value.is_finite() or not 0 <= value < most or (isinstance(exponent, int) and -exponent > places):
        message = COST_INVALID if field == "max_cost" else PRICE_INVALID
        largest = most - Decimal(1).scaleb(-places)
        raise InvalidInput(message.format(most=largest, places=places), data={"field": field})
    return value


def _member(*, tenant: Tenant, person_id: int | None) -> User | None:
    if person_id is None:
        return None
    membership = Membership.objects.select_related("user").filter(tenant=tenant, user_id=person_id).first()
    if membership is None:
        raise InvalidInput(PERSON_NOT_MEMBER.format(tenant=tenant.name), data={"field": "person"})
    return membership.user


def _budget_taken(*, tenant: Tenant, person: User | None, period: str) -> str:
    if person is None:
        return BUDGET_TAKEN_TENANT.format(tenant=tenant.name, period=period)
    return BUDGET_TAKEN_PERSON.format(person=person.get_username(), period=period)


def _budget_target(budget: LlmBudget) -> str:
    return f"{budget.user.get_username() if budget.user else 'whole tenant'}, per {budget.period}"


def _budget_detail(budget: LlmBudget) -> dict[str, object]:
    return {
        "period": budget.period,
        "person": budget.user_id,
        "max_tokens": budget.max_tokens,
        "max_cost": None if budget.max_cost is None else str(budget.max_cost),
    }
