"""The console's *Test the model* button: a tenant's admin makes one tiny call of a model through
the governed path and reads the reply, latency and tokens on the models page, or why there was no
reply; a viewer has no button and their post is refused; another tenant's model is not found.
The model answers through litellm's ``mock_response`` (the test script): no network."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from language_models.model_test import TEST_PURPOSE
from language_models.models import Feature, LlmUsage
from language_models.selectors import MODEL_NOT_FOUND
from tests.support.factories import LanguageModelFactory, TenantFactory
from tests.support.llm_admin_support import LlmBudgetFactory

# Transactional: the governed path writes its records on threads of their own, which see only
# committed rows. The audit trail's group commit belongs to a server's event loop, not to the one
# the test client's request makes for the call: its model.called rows are the end-to-end tests'.
pytestmark = pytest.mark.django_db(transaction=True)

API_KEY = "sk-console-model-test-0123456789"


@pytest.fixture(autouse=True)
def no_group_commit(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "GATEHOUSE_AUDIT": False}


@pytest.fixture
def script(tmp_path, settings):
    path = tmp_path / "llm-script.json"
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(path)}

    def write(answer: object) -> None:
        path.write_text(json.dumps({"responses": {TEST_PURPOSE: answer}}))

    return write


@pytest.fixture
def main_model(tenant):
    return LanguageModelFactory.create(tenant=tenant, name="Main", api_key=API_KEY)


def _test_url(tenant, model_id):
    return f"/console/{tenant.slug}/models/{model_id}/test/"


def test_an_admin_sees_the_reply_latency_and_tokens_on_the_models_page(
    client, tenant, ada, main_model, script
):
    script("OK")

    response = client.post(_test_url(tenant, main_model.pk))

    assert response.status_code == 200
    page = response.content.decode()
    assert '<blockquote class="wrap" id="model-test-reply">OK</blockquote>' in page
    assert "<code>openai/gpt-4o-mini</code> answered in" in page
    assert "30 tokens (10 in, 20 out)" in page
    assert 'id="models"' in page


def test_the_call_is_the_tenants_usage_by_the_admin(client, tenant, ada, main_model, script):
    script("OK")

    client.post(_test_url(tenant, main_model.pk))

    [record] = LlmUsage.objects.all()
    assert (record.tenant_id, record.user_id, record.feature, record.channel) == (
        tenant.pk,
        ada.pk,
        Feature.MODEL_TEST,
        "console",
    )


def test_a_provider_error_is_a_readable_message_never_a_500(client, tenant, ada, main_model, script):
    script({"error": "AuthenticationError"})

    response = client.post(_test_url(tenant, main_model.pk))

    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="model-test-error">' in page
    assert "refused the API key stored for openai/gpt-4o-mini" in page
    assert API_KEY not in page


def test_a_spent_budget_is_said_and_no_call_is_made(client, tenant, ada, main_model, script):
    script([])  # the script has no answer to give: a call would fail differently
    LlmBudgetFactory.create(tenant=tenant, max_tokens=0)

    response = client.post(_test_url(tenant, main_model.pk))

    assert response.status_code == 200
    assert "budget" in response.content.decode().split('id="model-test-error">')[1].lower()


def test_another_tenants_model_is_not_found(client, tenant, ada, script):
    theirs = LanguageModelFactory.create(tenant=TenantFactory.create(slug="other-tenant"), name="Theirs")

    response = client.post(_test_url(tenant, theirs.pk))

    assert response.status_code == 404
    assert MODEL_NOT_FOUND in response.content.decode()
    assert not LlmUsage.objects.exists()


def test_a_model_id_no_row_could_have_is_not_found(client, tenant, ada):
    assert client.post(_test_url(tenant, "9" * 40)).status_code == 404


def test_a_viewer_has_no_test_button(client, tenant, vic, main_model):
    page = client.get(f"/console/{tenant.slug}/models/").content.decode()

    assert "Test the model" not in page


def test_a_viewers_test_is_refused_and_makes_no_call(client, tenant, vic, main_model, script):
    script("OK")

    response = client.post(_test_url(tenant, main_model.pk))

    assert response.status_code == 403
    assert not LlmUsage.objects.exists()


def test_an_admin_sees_a_test_button_for_each_model(client, tenant, ada, main_model):
    page = client.get(f"/console/{tenant.slug}/models/").content.decode()

    assert f'action="{_test_url(tenant, main_model.pk)}"' in page


def test_a_test_without_the_csrf_token_is_refused(tenant, ada, main_model, script):
    script("OK")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ada)

    response = strict.post(_test_url(tenant, main_model.pk))

    assert response.status_code == 403
    assert not LlmUsage.objects.exists()


def test_a_test_is_a_post(client, tenant, ada, main_model):
    assert client.get(_test_url(tenant, main_model.pk)).status_code == 405
