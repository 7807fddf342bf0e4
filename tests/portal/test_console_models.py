"""The console's models and budgets section: a tenant's admin adds, changes and removes its models
(the key write-only) and budgets (spend so far shown against each limit), each change audited; a
viewer sees the page without forms and cannot post; hostile input gets the form's own message;
another tenant's model, budget or person is never found."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from accounts.models import Role
from core.crypto import secret_decrypt
from core.models import AuditAction, AuditEvent
from language_models.models import BudgetPeriod, LanguageModel, LlmBudget
from language_models.selectors import BUDGET_NOT_FOUND, MODEL_NOT_FOUND
from language_models.services import (
    BUDGET_TAKEN_TENANT,
    KEY_BOTH,
    NAME_INVISIBLE,
    NAME_TAKEN,
    NO_LIMIT,
    PERSON_NOT_MEMBER,
)
from portal.console.model_forms import _COST_INVALID, _PRICE_INVALID
from tests.support.factories import LanguageModelFactory, MembershipFactory, TenantFactory, UserFactory
from tests.support.llm_admin_support import LlmBudgetFactory, LlmUsageFactory

pytestmark = pytest.mark.django_db

SECRET_KEY_TYPED = "sk-console-test-0123456789abcdef"


@pytest.fixture
def outsider_tenant():
    return TenantFactory.create(slug="other-tenant", name="Other")


def _url(tenant, action=""):
    return f"/console/{tenant.slug}/{action}"


def _model_post(**overrides):
    return {
        "model_id": "",
        "name": "Main",
        "model": "openai/gpt-4o-mini",
        "api_key": "",
        "input_price_per_million": "",
        "output_price_per_million": "",
        **overrides,
    }


def _budget_post(**overrides):
    return {"budget_id": "", "person": "", "period": "day", "max_tokens": "", "max_cost": "", **overrides}


def test_the_page_lists_models_without_their_keys_and_budgets_with_whom_they_cap(client, tenant, ada):
    LanguageModelFactory.create(
        tenant=tenant,
        name="Main",
        model="anthropic/claude-sonnet-4-5",
        is_default=True,
        api_key=SECRET_KEY_TYPED,
        input_price_per_million=Decimal("3"),
    )
    LlmBudgetFactory.create(tenant=tenant, user=ada, period=BudgetPeriod.MONTH, max_tokens=None, max_cost=5)

    page = client.get(_url(tenant, "models/")).content.decode()

    assert "anthropic/claude-sonnet-4-5" in page
    assert "$3 / M" in page
    assert ">Stored<" in page
    assert SECRET_KEY_TYPED not in page
    assert "Per month (UTC)" in page
    assert "<bdi>ada</bdi>" in page


def test_an_admin_adds_a_model_whose_key_is_stored_encrypted_and_never_shown(client, tenant, ada):
    response = client.post(
        _url(tenant, "models/save/"),
        _model_post(api_key=SECRET_KEY_TYPED, is_default="on", input_price_per_million="0.15"),
        follow=True,
    )

    model = LanguageModel.objects.get(tenant=tenant)
    assert (model.name, model.is_default, model.input_price_per_million) == ("Main", True, Decimal("0.15"))
    assert SECRET_KEY_TYPED not in model.api_key_encrypted
    assert secret_decrypt(token=model.api_key_encrypted) == SECRET_KEY_TYPED
    assert "Main is saved." in response.content.decode()
    assert SECRET_KEY_TYPED not in response.content.decode()
    event = AuditEvent.objects.get(action=AuditAction.MODEL_CHANGED)
    assert (event.user, event.tenant, event.detail["change"], event.detail["key"]) == (
        ada,
        tenant,
        "added",
        "replaced",
    )
    assert SECRET_KEY_TYPED not in str(event.detail)


def test_a_blank_key_keeps_the_stored_one_and_the_change_form_never_shows_it(client, tenant, ada):
    model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=SECRET_KEY_TYPED)
    stored = model.api_key_encrypted

    edit_page = client.get(_url(tenant, f"models/?model={model.pk}")).content.decode()
    client.post(_url(tenant, "models/save/"), _model_post(model_id=str(model.pk), name="Renamed"))

    model.refresh_from_db()
    assert (model.name, model.api_key_encrypted) == ("Renamed", stored)
    assert SECRET_KEY_TYPED not in edit_page
    assert stored not in edit_page


def test_a_refused_form_never_echoes_the_typed_key(client, tenant, ada):
    response = client.post(
        _url(tenant, "models/save/"), _model_post(model="no-such-provider/x", api_key=SECRET_KEY_TYPED)
    )

    assert response.status_code == 422
    assert SECRET_KEY_TYPED not in response.content.decode()
    assert not LanguageModel.objects.exists()


def test_making_a_model_the_default_steps_the_previous_one_down(client, tenant, ada):
    old = LanguageModelFactory.create(tenant=tenant, name="Old", is_default=True)

    client.post(_url(tenant, "models/save/"), _model_post(name="New", is_default="on"))

    old.refresh_from_db()
    assert not old.is_default
    assert LanguageModel.objects.get(tenant=tenant, name="New").is_default


def test_an_admin_removes_a_model(client, tenant, ada):
    model = LanguageModelFactory.create(tenant=tenant, name="Gone")

    response = client.post(_url(tenant, "models/remove/"), {"model_id": str(model.pk)})

    assert response.status_code == 302
    assert not LanguageModel.objects.filter(pk=model.pk).exists()
    assert AuditEvent.objects.get(action=AuditAction.MODEL_CHANGED).detail["change"] == "removed"


def test_an_admin_adds_changes_and_removes_a_budget(client, tenant, ada):
    client.post(_url(tenant, "budgets/save/"), _budget_post(max_tokens="5000"))
    budget = LlmBudget.objects.get(tenant=tenant)
    assert (budget.period, budget.max_tokens, budget.max_cost, budget.user) == ("day", 5000, None, None)

    client.post(
        _url(tenant, "budgets/save/"),
        _budget_post(budget_id=str(budget.pk), period="month", max_cost="12.5", person=str(ada.pk)),
    )
    budget.refresh_from_db()
    assert (budget.period, budget.max_tokens, budget.max_cost, budget.user) == (
        "month",
        None,
        Decimal("12.5"),
        ada,
    )

    client.post(_url(tenant, "budgets/remove/"), {"budget_id": str(budget.pk)})
    assert not LlmBudget.objects.exists()
    changes = AuditEvent.objects.filter(action=AuditAction.BUDGET_CHANGED).order_by("pk")
    assert [event.detail["change"] for event in changes] == ["added", "changed", "removed"]


def test_spend_so_far_is_shown_against_each_limit(client, tenant, ada):
    LlmBudgetFactory.create(tenant=tenant, max_tokens=1000, max_cost=Decimal("2"))
    LlmBudgetFactory.create(tenant=tenant, user=ada, period=BudgetPeriod.MONTH, max_tokens=500)
    ada_membership = ada.memberships.get(tenant=tenant)
    LlmUsageFactory.create(membership=ada_membership, total_tokens=120, cost=Decimal("0.25"))
    LlmUsageFactory.create(tenant=tenant, total_tokens=80, cost=Decimal("0.5"))

    page = client.get(_url(tenant, "models/")).content.decode()

    assert "200 of 1000 used" in page
    assert "$0.7500 of $2.0000 used" in page
    assert "120 of 500 used" in page


def test_another_tenants_usage_does_not_count(client, tenant, ada, outsider_tenant):
    LlmBudgetFactory.create(tenant=tenant, max_tokens=1000)
    LlmUsageFactory.create(tenant=outsider_tenant, total_tokens=999)

    page = client.get(_url(tenant, "models/")).content.decode()

    assert "0 of 1000 used" in page


def test_a_viewer_sees_no_forms_and_their_posts_change_nothing(client, tenant):
    viewer = UserFactory.create(username="vic")
    MembershipFactory.create(user=viewer, tenant=tenant, role=Role.VIEWER)
    model = LanguageModelFactory.create(tenant=tenant, name="Main")
    budget = LlmBudgetFactory.create(tenant=tenant)
    client.force_login(viewer)

    page = client.get(_url(tenant, "models/")).content.decode()
    assert f'action="/console/{tenant.slug}/' not in page
    assert "Only the tenant&#x27;s admins change this" in page

    posts = [
        ("models/save/", _model_post(name="Sneaky")),
        ("models/remove/", {"model_id": str(model.pk)}),
        ("budgets/save/", _budget_post(max_tokens="1")),
        ("budgets/remove/", {"budget_id": str(budget.pk)}),
    ]
    statuses = [client.post(_url(tenant, path), data).status_code for path, data in posts]
    assert statuses == [403, 403, 403, 403]
    assert list(LanguageModel.objects.values_list("name", flat=True)) == ["Main"]
    assert list(LlmBudget.objects.values_list("pk", flat=True)) == [budget.pk]
    assert not AuditEvent.objects.filter(action__in=[AuditAction.MODEL_CHANGED, AuditAction.BUDGET_CHANGED])


def test_a_post_without_the_csrf_token_is_refused(tenant, ada):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)

    response = strict.post(_url(tenant, "budgets/save/"), _budget_post(max_tokens="1"))

    assert response.status_code == 403
    assert not LlmBudget.objects.exists()


@pytest.mark.parametrize(
    ("path", "data", "message"),
    [
        ("models/remove/", {"model_id": "{model}"}, MODEL_NOT_FOUND),
        ("models/save/", _model_post(model_id="{model}"), MODEL_NOT_FOUND),
        ("budgets/remove/", {"budget_id": "{budget}"}, BUDGET_NOT_FOUND),
        ("budgets/save/", _budget_post(budget_id="{budget}", max_tokens="1"), BUDGET_NOT_FOUND),
        ("models/?model={model}", None, MODEL_NOT_FOUND),
        ("models/?budget={budget}", None, BUDGET_NOT_FOUND),
        ("models/remove/", {"model_id": "9" * 40}, MODEL_NOT_FOUND),
        ("budgets/remove/", {"budget_id": "-1"}, BUDGET_NOT_FOUND),
    ],
)
def test_another_tenants_model_or_budget_is_not_found(
    client, tenant, ada, outsider_tenant, path, data, message
):
    theirs = LanguageModelFactory.create(tenant=outsider_tenant, name="Theirs")
    their_budget = LlmBudgetFactory.create(tenant=outsider_tenant)
    ids = {"model": theirs.pk, "budget": their_budget.pk}

    if data is None:
        response = client.get(_url(tenant, path.format(**ids)))
    else:
        response = client.post(_url(tenant, path), {k: v.format(**ids) for k, v in data.items()})

    assert response.status_code == 404
    assert message in response.content.decode()
    assert LanguageModel.objects.get(pk=theirs.pk).name == "Theirs"
    assert LlmBudget.objects.filter(pk=their_budget.pk).exists()


def test_another_tenants_person_cannot_be_given_a_budget(client, tenant, ada, outsider_tenant):
    stranger = UserFactory.create(username="stranger")
    MembershipFactory.create(user=stranger, tenant=outsider_tenant, role=Role.ADMIN)

    response = client.post(
        _url(tenant, "budgets/save/"), _budget_post(person=str(stranger.pk), max_tokens="1")
    )

    assert response.status_code == 422
    assert PERSON_NOT_MEMBER.format(tenant=tenant.name) in response.content.decode()
    assert not LlmBudget.objects.exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "Ma\u202ein", NAME_INVISIBLE.format(code="U+202E")),
        ("name", "Ma\u200bin", NAME_INVISIBLE.format(code="U+200B")),
        ("name", "x" * 5000, "A name has at most 100 characters."),
        ("name", "   ", "This field is required."),
        ("model", "x" * 300, "The language model is 300 characters long"),
        ("model", "open ai/gpt", "contains spaces, control or non-ASCII characters"),
        ("input_price_per_million", "NaN", _PRICE_INVALID),
        ("input_price_per_million", "Infinity", _PRICE_INVALID),
        ("input_price_per_million", "-1", _PRICE_INVALID),
        ("output_price_per_million", "1e30", _PRICE_INVALID),
        ("output_price_per_million", "0.0000001", _PRICE_INVALID),
        ("output_price_per_million", "9" * 5000, _PRICE_INVALID),
        (
            "api_key",
            "sk-with\u202econtrol",
            "The API key contains a space, an invisible or a control character",
        ),
    ],
)
def test_hostile_model_input_gets_the_forms_own_message(client, tenant, ada, field, value, message):
    response = client.post(_url(tenant, "models/save/"), _model_post(**{field: value}))

    assert response.status_code == 422
    page = response.content.decode()
    assert message.replace("'", "&#x27;") in page
    assert not LanguageModel.objects.exists()


def test_a_new_key_and_removing_the_stored_one_together_is_refused(client, tenant, ada):
    response = client.post(_url(tenant, "models/save/"), _model_post(api_key="sk-1", remove_api_key="on"))

    assert response.status_code == 422
    assert KEY_BOTH in response.content.decode()


def test_a_second_model_of_the_same_name_is_refused(client, tenant, ada):
    LanguageModelFactory.create(tenant=tenant, name="Main")

    response = client.post(_url(tenant, "models/save/"), _model_post(name="Main"))

    assert response.status_code == 422
    assert NAME_TAKEN.format(name="Main") in response.content.decode()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, NO_LIMIT),
        ({"max_tokens": "-5"}, "A token limit is a whole number from 0 to"),
        ({"max_tokens": "9" * 30}, "A token limit is a whole number from 0 to"),
        ({"max_tokens": "9" * 5000}, "A token limit is a whole number from 0 to"),
        ({"max_tokens": "1.5"}, "A token limit is a whole number from 0 to"),
        ({"max_cost": "NaN"}, _COST_INVALID),
        ({"max_cost": "-Infinity"}, _COST_INVALID),
        ({"max_cost": "-0.01"}, _COST_INVALID),
        ({"max_cost": "100000000"}, _COST_INVALID),
        ({"period": "year", "max_tokens": "1"}, "Select a valid choice."),
        ({"person": "not-a-number", "max_tokens": "1"}, "Choose a member of Acme Test"),
    ],
)
def test_hostile_budget_input_gets_the_forms_own_message(client, tenant, ada, fields, message):
    response = client.post(_url(tenant, "budgets/save/"), _budget_post(**fields))

    assert response.status_code == 422
    assert message in response.content.decode()
    assert not LlmBudget.objects.exists()


def test_a_second_tenant_budget_for_the_same_period_is_refused(client, tenant, ada):
    LlmBudgetFactory.create(tenant=tenant, period=BudgetPeriod.DAY)

    response = client.post(_url(tenant, "budgets/save/"), _budget_post(max_tokens="7"))

    assert response.status_code == 422
    assert BUDGET_TAKEN_TENANT.format(tenant=tenant.name, period="day") in response.content.decode()


@pytest.mark.parametrize("path", ["models/save/", "budgets/save/", "models/remove/"])
def test_a_nul_or_invalid_utf8_in_a_form_is_refused_with_the_reason(client, tenant, ada, path):
    body = b"name=Ma%00in&model=openai%2Fgpt-4o-mini&max_tokens=1&model_id=%FF"

    response = client.post(_url(tenant, path), body, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 400
    assert 'role="alert"' in response.content.decode()
    assert not LanguageModel.objects.exists()
    assert not LlmBudget.objects.exists()


def test_the_page_costs_a_bounded_number_of_queries(client, tenant, ada, django_assert_max_num_queries):
    for n in range(8):
        person = UserFactory.create(username=f"person-{n}")
        membership = MembershipFactory.create(user=person, tenant=tenant, role=Role.VIEWER)
        LlmBudgetFactory.create(tenant=tenant, user=person)
        LlmUsageFactory.create(membership=membership)
        LanguageModelFactory.create(tenant=tenant)

    with django_assert_max_num_queries(12):
        response = client.get(_url(tenant, "models/"))

    assert response.status_code == 200
