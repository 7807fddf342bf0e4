"""Importing and exporting a tenant's workflow: every problem with its line, and all or nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from data_agent.sample import INSERTS
from tests.support.factories import DatasetFactory, OntologyFactory, TenantFactory
from workflows.models import Workflow, WorkflowCommand, WorkflowContext
from workflows.services import WorkflowImportFailed, workflow_export, workflow_import

DEMO = Path(__file__).resolve().parents[2] / "workflows" / "demo" / "sales_analyst.yaml"

GOOD = textwrap.dedent(
    """\
    name: Tiny
    description: A small workflow.
    purpose: Tests.
    contexts:
      - name: shop
        description: The shop.
        commands:
          - name: Products
            description: Products of a category.
            parameters:
              - name: category
                type: string
                required: true
                description: The category.
            examples:
              - shop/Products <category>rockets</category>
            query:
              ontology: Acme sales
              sql: SELECT name FROM products WHERE category = :category
          - name: Me
            tool:
              name: whoami
              arguments: {}
          - name: Help
            builtin: list_commands
    """
)


def sample_ontology(tenant):
    """An ontology named like acme's sample one, with its tables as datasets (the SQL gate's list)."""
    ontology = OntologyFactory.create(data_source__tenant=tenant, name="Acme sales")
    for table in INSERTS:
        DatasetFactory.create(ontology=ontology, name=table)
    return ontology


@pytest.fixture
def ontology(tenant):
    return sample_ontology(tenant)


def problems_of(tenant, source: str) -> list[tuple[int, str]]:
    with pytest.raises(WorkflowImportFailed) as caught:
        workflow_import(tenant=tenant, source=source)
    return [(p.line, p.message) for p in caught.value.problems]


def test_it_imports_a_valid_file_into_objects(tenant, ontology):
    workflow = workflow_import(tenant=tenant, source=GOOD)

    assert workflow.name == "Tiny"
    assert [c.name for c in workflow.contexts.all()] == ["shop"]
    commands = {c.qualified_name: c for c in WorkflowCommand.objects.filter(context__workflow=workflow)}
    assert set(commands) == {"shop/Products", "shop/Me", "shop/Help"}
    assert commands["shop/Products"].ontology == ontology
    assert commands["shop/Me"].tool_name == "whoami"
    assert commands["shop/Help"].builtin == "list_commands"


def test_the_export_imports_back_to_the_same_workflow(tenant, ontology):
    workflow_import(tenant=tenant, source=DEMO.read_text())
    exported = workflow_export(tenant=tenant)

    workflow_import(tenant=tenant, source=exported)

    assert workflow_export(tenant=tenant) == exported
    assert Workflow.objects.filter(tenant=tenant).count() == 1


def test_the_demo_workflow_imports_with_a_dozen_commands(tenant, ontology):
    workflow = workflow_import(tenant=tenant, source=DEMO.read_text())

    assert [c.name for c in workflow.contexts.all()] == ["catalogue", "customers", "orders"]
    assert WorkflowCommand.objects.filter(context__workflow=workflow).count() >= 12


def test_models_clean_accepts_what_the_import_wrote(tenant, ontology):
    workflow = workflow_import(tenant=tenant, source=DEMO.read_text())

    workflow.full_clean()
    for context in workflow.contexts.all():
        context.full_clean()
        for command in context.commands.all():
            command.full_clean()


@pytest.mark.parametrize(
    ("old", "new", "line", "fragment"),
    [
        ("description: A small workflow.", "descripton: x", 2, "Unknown key 'descripton'"),
        ("  - name: shop", "  - name: Shop!", 5, "not a valid name"),
        ("    - name: Products", "    - name: Help", 24, "already defined on line 8"),
        ("            type: string", "            type: text", 11, "type must be one of"),
        ("            required: true", "            required: maybe", 11, "required must be true or false"),
        ("<category>rockets</category>", "<colour>red</colour>", 16, "does not declare"),
        ("- shop/Products <category>", "- shop/Nope <category>", 16, "names shop/Nope"),
        (
            "- shop/Products <category>rockets</category>",
            "- shop/Products <category>x",
            16,
            "Unexpected text",
        ),
        ("          name: whoami", "          name: no_such_tool", 22, "no tool named 'no_such_tool'"),
        ("category = :category", "category = :region", 19, "binds :region"),
        ("SELECT name FROM products", "SELECT name FROM secrets", 19, "not in this ontology"),
        ("SELECT name FROM products", "DELETE FROM products", 19, "only SELECT"),
        ("builtin: list_commands", "builtin: reboot", 25, "builtin must be one of"),
        ("purpose: Tests.", "purpose: [1, 2]", 3, "must be a string"),
        ("contexts:", "contexts: [unclosed", 5, "YAML syntax error"),
    ],
)
def test_each_problem_is_reported_with_its_line(tenant, ontology, old, new, line, fragment):
    source = GOOD.replace(old, new, 1)
    assert source != GOOD

    problems = problems_of(tenant, source)

    assert any(found_line == line and fragment in message for found_line, message in problems), problems


def test_every_problem_is_reported_not_only_the_first(tenant, ontology):
    source = GOOD.replace("descripton", "x").replace("description: A small workflow.", "descripton: x")
    source = source.replace("type: string", "type: text").replace("name: whoami", "name: nope")

    lines = [line for line, _ in problems_of(tenant, source)]

    assert lines == [2, 11, 22]


def test_another_tenants_ontology_is_as_unknown_as_a_made_up_one(tenant, ontology):
    theirs = OntologyFactory.create(
        data_source__tenant=TenantFactory.create(slug="rival"), name="Rival sales"
    )
    by_their_id = problems_of(tenant, GOOD.replace("ontology: Acme sales", f"ontology: {theirs.pk}"))
    by_made_up_id = problems_of(
        tenant, GOOD.replace("ontology: Acme sales", "ontology: 00000000-0000-4000-8000-000000000000")
    )
    by_their_name = problems_of(tenant, GOOD.replace("ontology: Acme sales", "ontology: Rival sales"))

    assert (
        by_their_id
        == by_made_up_id
        == by_their_name
        == [(8, "shop/Products: No such ontology in this tenant.")]
    )


def test_the_ontology_may_be_named_by_its_id(tenant, ontology):
    workflow = workflow_import(
        tenant=tenant, source=GOOD.replace("ontology: Acme sales", f"ontology: {ontology.pk}")
    )

    assert WorkflowCommand.objects.get(context__workflow=workflow, name="Products").ontology == ontology


def test_a_broken_file_after_a_good_import_changes_nothing(tenant, ontology):
    workflow_import(tenant=tenant, source=GOOD)
    before = workflow_export(tenant=tenant)

    problems_of(tenant, GOOD.replace("name: Tiny", "name: Other").replace("type: string", "type: text"))

    assert workflow_export(tenant=tenant) == before
    assert WorkflowContext.objects.filter(workflow__tenant=tenant).count() == 1


def test_an_import_replaces_only_this_tenants_workflow(tenant, ontology):
    other = TenantFactory.create(slug="other-wf")
    sample_ontology(other)
    workflow_import(tenant=other, source=GOOD)

    workflow_import(tenant=tenant, source=GOOD.replace("name: Tiny", "name: Mine"))
    workflow_import(tenant=tenant, source=GOOD.replace("name: Tiny", "name: Mine again"))

    assert Workflow.objects.get(tenant=other).name == "Tiny"
    assert Workflow.objects.get(tenant=tenant).name == "Mine again"
