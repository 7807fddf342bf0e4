"""Each tenant's language model: which one a call uses, its write-only key, the demo and deploy checks."""

from __future__ import annotations

import json
import os
import secrets

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import IntegrityError, connection, transaction
from django.utils.html import escape

from accounts.models import Tenant
from core.errors import NotReady, Unavailable
from language_models.admin import KEY_BOTH, KEY_NONE, KEY_STORED
from language_models.model_test import TEST_PURPOSE
from language_models.models import LanguageModel
from language_models.selectors import (
    KEY_UNDECRYPTABLE,
    NO_DEFAULT_MODEL,
    NO_MODEL_CONFIGURED,
    ModelConfig,
    NoModelConfigured,
    language_model_for_tenant,
)
from tests.support.admin_support import admin_url, post_action
from tests.support.factories import LanguageModelFactory, TenantFactory
from tests.support.llm_admin_support import model_form
from tests.support.python_process import python_run

pytestmark = pytest.mark.django_db

API_KEY = "sk-test-write-only-9f8e7d6c5b4a"


@pytest.fixture
def other_tenant(db):
    return TenantFactory(slug="other-test")


# Which model a tenant's calls use


def test_the_tenants_default_model_is_used(tenant):
    LanguageModelFactory.create(tenant=tenant, name="cheap", model="openai/gpt-4o-mini")
    LanguageModelFactory.create(
        tenant=tenant, name="smart", model="anthropic/claude-sonnet-4-5", is_default=True
    )

    assert language_model_for_tenant(tenant_id=tenant.pk).model == "anthropic/claude-sonnet-4-5"


def test_a_tenants_only_model_is_used_without_being_marked_default(tenant):
    LanguageModelFactory.create(tenant=tenant, model="ollama/llama3", is_default=False)

    assert language_model_for_tenant(tenant_id=tenant.pk).model == "ollama/llama3"


def test_without_a_model_it_says_none_is_configured(tenant):
    with pytest.raises(NoModelConfigured) as raised:
        language_model_for_tenant(tenant_id=tenant.pk)

    assert isinstance(raised.value, NotReady)
    assert raised.value.jsonrpc_code == -32003
    assert raised.value.message == NO_MODEL_CONFIGURED
    assert raised.value.data == {"reason": "no_model_configured"}
    assert "run_query works without one" in raised.value.message


def test_several_models_and_no_default_are_refused_saying_so(tenant):
    LanguageModelFactory.create(tenant=tenant, name="one")
    LanguageModelFactory.create(tenant=tenant, name="two")

    with pytest.raises(NoModelConfigured) as raised:
        language_model_for_tenant(tenant_id=tenant.pk)

    assert raised.value.message == NO_DEFAULT_MODEL
    assert "several language models and none is marked as the default" in raised.value.message
    assert raised.value.data == {"reason": "no_model_configured"}


def test_another_tenants_model_is_never_used(tenant, other_tenant):
    LanguageModelFactory.create(tenant=other_tenant, model="openai/gpt-4o", is_default=True)

    with pytest.raises(NoModelConfigured):
        language_model_for_tenant(tenant_id=tenant.pk)

    LanguageModelFactory.create(tenant=tenant, model="openai/gpt-4o-mini")
    assert language_model_for_tenant(tenant_id=tenant.pk).model == "openai/gpt-4o-mini"


def test_the_model_settings_reach_the_call(tenant):
    LanguageModelFactory.create(
        tenant=tenant,
        model="ollama/llama3",
        api_base="http://127.0.0.1:11434",
        temperature=0.7,
        max_output_tokens=512,
        request_timeout_seconds=90,
    )

    config = language_model_for_tenant(tenant_id=tenant.pk)

    assert config == ModelConfig(
        model="ollama/llama3",
        api_key=None,
        api_base="http://127.0.0.1:11434",
        temperature=0.7,
        max_output_tokens=512,
        timeout_seconds=90.0,
        key_source="environment",
    )


def test_a_second_default_in_one_tenant_is_refused_by_the_database(tenant, other_tenant):
    LanguageModelFactory.create(tenant=tenant, is_default=True)
    LanguageModelFactory.create(tenant=other_tenant, is_default=True)

    with pytest.raises(IntegrityError), transaction.atomic():
        LanguageModelFactory.create(tenant=tenant, is_default=True)


@pytest.mark.parametrize(
    "values",
    [
        {"temperature": 2.5},
        {"temperature": -0.1},
        {"request_timeout_seconds": 0},
        {"request_timeout_seconds": 601},
    ],
)
def test_out_of_range_settings_are_refused_by_the_database(tenant, values):
    with pytest.raises(IntegrityError), transaction.atomic():
        LanguageModelFactory.create(tenant=tenant, **values)


# The API key at rest


def test_the_key_is_encrypted_at_rest_decrypted_for_the_call_and_kept_out_of_repr(tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, api_key=API_KEY)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT api_key_encrypted FROM language_models_languagemodel WHERE id = %s", [language_model.pk]
        )
        [stored] = cursor.fetchone()

    config = language_model_for_tenant(tenant_id=tenant.pk)

    assert API_KEY not in stored
    assert config.api_key == API_KEY
    assert API_KEY not in repr(config)
    assert API_KEY not in str(config)


def test_a_key_stored_under_another_encryption_key_asks_for_it_again(tenant):
    foreign = Fernet(Fernet.generate_key()).encrypt(API_KEY.encode()).decode()
    LanguageModelFactory.create(tenant=tenant, api_key_encrypted=foreign)

    with pytest.raises(Unavailable) as raised:
        language_model_for_tenant(tenant_id=tenant.pk)

    assert raised.value.message == KEY_UNDECRYPTABLE
    assert raised.value.data == {"reason": "llm_key_undecryptable"}


# The admin: the key is write-only


def test_an_operator_adds_a_model_and_its_key_is_stored_encrypted(client, operator, tenant):
    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant, api_key=API_KEY))

    assert response.status_code == 302
    language_model = LanguageModel.objects.get()
    assert language_model.is_default
    assert API_KEY not in language_model.api_key_encrypted
    assert language_model_for_tenant(tenant_id=tenant.pk).api_key == API_KEY


def test_the_change_page_never_shows_the_stored_key(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, api_key=API_KEY)

    page = client.get(admin_url(LanguageModel, "change", language_model.pk)).content.decode()

    assert API_KEY not in page
    assert language_model.api_key_encrypted not in page
    assert escape(KEY_STORED) in page
    assert 'type="password"' in page
    assert "Remove the stored key" in page


def test_a_model_without_a_key_says_the_environment_provides_it(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant)

    page = client.get(admin_url(LanguageModel, "change", language_model.pk)).content.decode()

    assert escape(KEY_NONE) in page


def test_saving_with_a_blank_key_keeps_the_stored_one(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)

    response = client.post(
        admin_url(LanguageModel, "change", language_model.pk), model_form(tenant, model="openai/gpt-4o")
    )

    assert response.status_code == 302
    config = language_model_for_tenant(tenant_id=tenant.pk)
    assert (config.model, config.api_key) == ("openai/gpt-4o", API_KEY)


def test_a_new_key_replaces_the_stored_one(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)

    client.post(
        admin_url(LanguageModel, "change", language_model.pk), model_form(tenant, api_key="sk-replacement")
    )

    assert language_model_for_tenant(tenant_id=tenant.pk).api_key == "sk-replacement"


def test_the_checkbox_removes_the_stored_key(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)

    response = client.post(
        admin_url(LanguageModel, "change", language_model.pk), model_form(tenant, remove_api_key="on")
    )

    assert response.status_code == 302
    language_model.refresh_from_db()
    assert language_model.api_key_encrypted == ""
    assert language_model_for_tenant(tenant_id=tenant.pk).api_key is None


def test_a_new_key_and_the_removal_together_are_refused(client, operator, tenant):
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)

    response = client.post(
        admin_url(LanguageModel, "change", language_model.pk),
        model_form(tenant, api_key="sk-replacement", remove_api_key="on"),
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["remove_api_key"] == [KEY_BOTH]
    assert language_model_for_tenant(tenant_id=tenant.pk).api_key == API_KEY


def test_a_refused_form_does_not_echo_the_key_typed(client, operator, tenant):
    form = model_form(tenant, api_key=API_KEY, temperature="3")
    response = client.post(admin_url(LanguageModel, "add"), form)

    assert response.status_code == 200
    assert "temperature" in response.context["adminform"].form.errors
    assert API_KEY not in response.content.decode()
    assert not LanguageModel.objects.exists()


def test_a_second_default_in_the_tenant_is_refused_with_a_message(client, operator, tenant):
    LanguageModelFactory.create(tenant=tenant, name="First", is_default=True)

    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant, name="Second"))

    assert response.status_code == 200
    assert "This tenant already has a default language model." in response.content.decode()
    assert LanguageModel.objects.count() == 1


def test_the_same_name_twice_in_a_tenant_is_refused(client, operator, tenant):
    LanguageModelFactory.create(tenant=tenant, name="Main")

    response = client.post(admin_url(LanguageModel, "add"), model_form(tenant, is_default=""))

    assert response.status_code == 200
    assert LanguageModel.objects.count() == 1


# The admin's "Test the model" action


@pytest.fixture
def script(tmp_path, settings):
    path = tmp_path / "llm-script.json"
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(path)}

    def write(answer: object) -> None:
        path.write_text(json.dumps({"responses": {TEST_PURPOSE: answer}}))

    return write


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("admin_model_test")
def test_testing_a_model_shows_its_answer(client, operator, tenant, script):
    script("OK")
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)

    response = post_action(client, LanguageModel, "test_model", [language_model])

    [message] = [str(m) for m in response.context["messages"]]
    assert message.startswith("Main: openai/gpt-4o-mini answered 'OK'")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("admin_model_test")
def test_testing_a_model_whose_key_is_refused_says_so(client, operator, tenant, script):
    script({"error": "AuthenticationError"})
    language_model = LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)

    response = post_action(client, LanguageModel, "test_model", [language_model])

    [message] = list(response.context["messages"])
    assert message.level_tag == "error"
    assert "refused the API key stored for openai/gpt-4o-mini" in str(message)
    assert API_KEY not in response.content.decode()


# bootstrap_demo


def test_the_demo_gets_a_default_model_from_demo_llm_model(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    monkeypatch.setenv("DEMO_LLM_MODEL", "openai/gpt-4o-mini")

    call_command("bootstrap_demo", verbosity=0)

    acme = Tenant.objects.get(slug="acme")
    assert list(LanguageModel.objects.filter(tenant=acme).values_list("name", "model", "is_default")) == [
        ("Demo model", "openai/gpt-4o-mini", True)
    ]
    config = language_model_for_tenant(tenant_id=acme.pk)
    assert (config.model, config.api_key) == ("openai/gpt-4o-mini", None)
    assert not LanguageModel.objects.filter(tenant__slug="globex").exists()


def test_running_the_demo_again_updates_the_model_and_keeps_one_default(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    monkeypatch.setenv("DEMO_LLM_MODEL", "openai/gpt-4o-mini")
    call_command("bootstrap_demo", verbosity=0)
    acme = Tenant.objects.get(slug="acme")
    LanguageModel.objects.filter(tenant=acme).update(is_default=False)
    LanguageModelFactory.create(tenant=acme, name="Operator's", is_default=True)
    monkeypatch.setenv("DEMO_LLM_MODEL", "anthropic/claude-sonnet-4-5")

    call_command("bootstrap_demo", verbosity=0)

    assert sorted(LanguageModel.objects.filter(tenant=acme).values_list("name", "model", "is_default")) == [
        ("Demo model", "anthropic/claude-sonnet-4-5", True),
        ("Operator's", "openai/gpt-4o-mini", False),
    ]


def test_without_demo_llm_model_the_demo_has_no_model(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    monkeypatch.delenv("DEMO_LLM_MODEL", raising=False)

    call_command("bootstrap_demo", verbosity=0)

    acme = Tenant.objects.get(slug="acme")
    assert not LanguageModel.objects.filter(tenant=acme).exists()
    with pytest.raises(NoModelConfigured):
        language_model_for_tenant(tenant_id=acme.pk)


# check --deploy


def test_the_deploy_check_reports_a_mock_script_as_an_error(settings, tmp_path):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(tmp_path / "script.json")}

    with pytest.raises(SystemCheckError, match=r"language_models\.E001"):
        call_command("check", deploy=True, tags=["security"])


def test_the_deploy_check_is_quiet_without_a_mock_script(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": None}

    call_command("check", deploy=True, tags=["security"])


@pytest.mark.parametrize(
    ("public_url", "refusal"),
    [
        ("https://mcp.example.com", "LLM_MOCK_RESPONSES_FILE is for tests: it needs a loopback PUBLIC_URL"),
        ("http://127.0.0.1:8000", "language_models.E001"),
    ],
    ids=["public-refused-at-start", "loopback-refused-by-deploy-check"],
)
def test_a_mock_script_in_the_environment_fails_the_deploy_check(tmp_path, public_url, refusal):
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith(("SECRET_KEY", "DEBUG"))},
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PUBLIC_URL": public_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "LLM_MOCK_RESPONSES_FILE": str(tmp_path / "script.json"),
        "LOG_LEVEL": "ERROR",
    }
    result = python_run(["manage.py", "check", "--deploy"], env)

    assert result.returncode != 0
    assert refusal in result.stderr
