"""The admin's language model pages (``language_models.admin``) change models through the
console's services (``language_model_save``, ``language_model_delete``): each change is audited as
``model.changed`` with the operator's name and never the key, a name the console would refuse is
refused beside its field, and a model stays in its tenant."""

from __future__ import annotations

import pytest

from core.models import AuditAction, AuditEvent
from language_models.models import LanguageModel
from language_models.services import NAME_INVISIBLE
from tests.support.admin_support import admin_url
from tests.support.factories import LanguageModelFactory, TenantFactory
from tests.support.llm_admin_support import model_form

pytestmark = pytest.mark.django_db

API_KEY = "sk-admin-audit-0123456789abcdef"


def test_adding_a_model_is_audited_with_the_operators_name_and_never_the_key(client, operator, tenant):
    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant, api_key=API_KEY))

    assert response.status_code == 302
    row = AuditEvent.objects.get(action=AuditAction.MODEL_CHANGED)
    assert (row.user, row.tenant, row.target) == (operator, tenant, "Main")
    assert (row.detail["change"], row.detail["key"]) == ("added", "replaced")
    assert API_KEY not in str(row.detail)


def test_changing_a_model_is_audited_naming_the_operator_fields_it_changed(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)

    response = client.post(
        admin_url(LanguageModel, "change", language_model.pk),
        model_form(tenant, temperature="0.5", api_base="https://llm.example.test/v1"),
    )

    assert response.status_code == 302
    language_model.refresh_from_db()
    assert (language_model.temperature, language_model.api_base) == (0.5, "https://llm.example.test/v1")
    row = AuditEvent.objects.get(action=AuditAction.MODEL_CHANGED)
    assert (row.user, row.detail["change"], row.detail["key"]) == (operator, "changed", "kept")
    assert row.detail["tuning"] == ["api_base", "temperature"]
    assert "llm.example.test" not in str(row.detail)


def test_removing_a_model_is_audited_with_the_operators_name(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main")

    response = client.post(admin_url(LanguageModel, "delete", language_model.pk), {"post": "yes"})

    assert response.status_code == 302
    assert not LanguageModel.objects.exists()
    row = AuditEvent.objects.get(action=AuditAction.MODEL_CHANGED)
    assert (row.user, row.target, row.detail["change"]) == (operator, "Main", "removed")


def test_an_invisible_character_in_the_name_is_refused_beside_it(client, operator, tenant):
    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant, name="Ma\u202ein"))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["name"] == [NAME_INVISIBLE.format(code="U+202E")]
    assert not LanguageModel.objects.exists()


def test_a_model_stays_in_its_tenant_whatever_tenant_is_posted(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main")
    elsewhere = TenantFactory.create(slug="elsewhere")

    response = client.post(
        admin_url(LanguageModel, "change", language_model.pk), model_form(elsewhere, name="Renamed")
    )

    assert response.status_code == 302
    language_model.refresh_from_db()
    assert (language_model.tenant, language_model.name) == (tenant, "Renamed")
