"""The admin edits the same workflow objects under the same rules as the YAML import."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from tests.support.factories import OntologyFactory, TenantFactory
from tests.workflows.test_workflow_import import sample_ontology
from workflows.models import ActionKind, Workflow, WorkflowCommand, WorkflowContext


@pytest.fixture
def context(tenant):
    workflow = Workflow.objects.create(tenant=tenant, name="Sales analyst")
    return WorkflowContext.objects.create(workflow=workflow, name="orders")


def query_command(context, **overrides) -> WorkflowCommand:
    fields = {
        "context": context,
        "name": "ByStatus",
        "action": ActionKind.QUERY,
        "parameters": [{"name": "status", "type": "string", "required": True}],
        "examples": ["orders/ByStatus <status>shipped</status>"],
        "ontology": sample_ontology(context.workflow.tenant),
        "sql": "SELECT id FROM orders WHERE status = :status",
    }
    return WorkflowCommand(**{**fields, **overrides})


def test_a_valid_command_passes_clean(context):
    query_command(context).full_clean()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": "bad name"}, "name"),
        ({"description": "nul\x00"}, "description"),
        ({"description": "x" * 5000}, "description"),
        ({"parameters": [{"name": "status", "type": "text"}]}, "parameters"),
        ({"examples": ["orders/ByStatus <colour>red</colour>"]}, "examples"),
        ({"sql": "SELECT id FROM orders WHERE status = :other"}, "sql"),
        ({"ontology": None}, "ontology"),
        ({"sql": "DELETE FROM orders WHERE status = :status"}, "sql"),
        ({"sql": "SELECT * FROM secrets WHERE status = :status"}, "sql"),
    ],
)
def test_clean_refuses_what_the_import_refuses(context, overrides, field):
    with pytest.raises(ValidationError) as caught:
        query_command(context, **overrides).full_clean()

    assert field in caught.value.message_dict


def test_another_tenants_ontology_is_refused_as_unknown(context):
    theirs = OntologyFactory.create(data_source__tenant=TenantFactory.create(slug="rival"))

    with pytest.raises(ValidationError) as caught:
        query_command(context, ontology=theirs).full_clean()

    assert caught.value.message_dict["ontology"] == ["No such ontology in this tenant."]


def test_an_operator_opens_a_context_with_its_commands(client, operator, context):
    query_command(context).save()

    response = client.get(reverse("admin:workflows_workflowcontext_change", args=[context.pk]))

    assert response.status_code == 200
    assert b"ByStatus" in response.content
