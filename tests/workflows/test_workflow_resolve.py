"""Resolving a command text: every way it can be wrong is a -32602 saying exactly what, with the
expected form; a command beyond the caller's role is -32001; nothing of another tenant is seen."""

from __future__ import annotations

import datetime

import pytest

from core.errors import InsufficientScope, InvalidInput, NotFound
from data_agent.models import Ontology, OntologyStatus
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory
from tests.support.workflow_support import EVERY_KIND, identity_for, sample_with_workflow
from tests.workflows.test_workflow_import import DEMO
from workflows.catalogue import NO_WORKFLOW, commands_visible, first_context, workflow_view
from workflows.execution import command_resolve
from workflows.models import WorkflowCommand
from workflows.services import WorkflowImportFailed, workflow_import

ALL = frozenset({"account", "conformance", "data_agent"})
NO_DATA_AGENT = frozenset({"account", "conformance"})


@pytest.fixture
def admin(tenant):
    sample_with_workflow(tenant, EVERY_KIND)
    return identity_for(MembershipFactory(user=UserFactory(username="ada"), tenant=tenant, role="admin"))


@pytest.fixture
def viewer(tenant, admin):
    return identity_for(MembershipFactory(user=UserFactory(username="vic"), tenant=tenant, role="viewer"))


def resolve(identity, text, *, context="shop", enabled=ALL):
    return command_resolve(
        text=text,
        tenant_id=identity.tenant_id,
        context=context,
        granted=identity.scopes,
        enabled_toolsets=enabled,
    )


def refusal(identity, text, **kwargs) -> dict:
    with pytest.raises(InvalidInput) as caught:
        resolve(identity, text, **kwargs)
    data = caught.value.data
    assert data is not None
    assert data["detail"] == caught.value.message
    return data


def test_a_query_command_resolves_with_defaults_filled(admin):
    resolved = resolve(admin, "shop/Products <category>rockets</category>")
    assert resolved.command.qualified_name == "shop/Products"
    assert resolved.parameters == {"category": "rockets", "prefix": "", "limit": 3}
    assert resolved.bound == ("category", "limit", "prefix")
    assert resolved.source is not None
    assert resolved.context == "shop"


def test_each_type_is_coerced(admin):
    resolved = resolve(admin, "shop/Typed <n> -7 </n><x>2.5</x><b>TRUE</b><d>2025-02-28</d>")
    assert resolved.parameters == {"n": -7, "x": 2.5, "b": True, "d": datetime.date(2025, 2, 28)}
    assert resolve(admin, "shop/Typed <n>1</n><x>.5</x><d>2024-02-29</d>").parameters["b"] is False


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("<n>1.5</n><x>1</x><d>2025-01-01</d>", "n"),
        ("<n>1</n><x>abc</x><d>2025-01-01</d>", "x"),
        ("<n>1</n><x>1</x><b>yes</b><d>2025-01-01</d>", "b"),
        ("<n>1</n><x>1</x><d>2025-02-30</d>", "d"),
        ("<n>1</n><x>1</x><d>01/02/2025</d>", "d"),
        ("<n>99999999999999999999</n><x>1</x><d>2025-01-01</d>", "n"),
    ],
)
def test_an_ill_typed_value_names_the_parameter_and_the_expected_form(admin, value, name):
    data = refusal(admin, f"shop/Typed {value}")
    assert data["problem"] == "invalid_value"
    assert data["parameter"] == name
    assert data["expected"] == "shop/Typed <n>integer</n> <x>number</x> [<b>boolean</b>] <d>date</d>"
    assert {"name": "d", "type": "date", "required": True, "description": ""} in data["parameters"]


def test_a_missing_parameter_is_named(admin):
    data = refusal(admin, "shop/Products")
    assert data["problem"] == "missing_parameter"
    assert data["missing"] == ["category"]
    assert (
        data["expected"]
        == "shop/Products <category>string</category> [<prefix>string</prefix>] [<limit>integer</limit>]"
    )
    assert data["examples"] == ["shop/Products <category>rockets</category>"]
    assert "category" in data["detail"]


def test_an_unknown_parameter_is_named(admin):
    data = refusal(admin, "shop/Products <category>x</category> <colour>red</colour>")
    assert data["problem"] == "unknown_parameter"
    assert "colour" in data["detail"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "Products",
        "shop/",
        "shop/Products <category>x",
        "shop/Products junk",
        "Shop/Products",
        "shop/Products <category>a</category><category>b</category>",
        "x" * 5000,
    ],
)
def test_malformed_text_says_what_and_where(admin, text):
    data = refusal(admin, text)
    assert data["problem"] == "malformed"
    assert data["command"] == text[:200]
    assert "expected" in data


@pytest.mark.parametrize(
    "text", ["shop/Products <category>a\x00</category>", "shop/Products <category>\ud800</category>"]
)
def test_nul_and_lone_surrogates_are_malformed_and_echoed_storably(admin, text):
    data = refusal(admin, text)
    assert data["problem"] == "malformed"
    assert "\x00" not in data["command"]
    assert "\ud800" not in data["command"]


def test_deep_or_huge_values_are_plain_text_not_a_crash(admin):
    nested = "<category>" + "<x>" * 1000 + "</category>"
    resolved = resolve(admin, f"shop/Products {nested}")
    assert resolved.parameters["category"].startswith("<x><x>")


def test_an_unknown_command_lists_close_ones(admin):
    data = refusal(admin, "shop/Product <category>x</category>")
    assert data["problem"] == "unknown_command"
    assert "shop/Products" in data["closeCommands"]
    assert "Did you mean" in data["detail"]


def test_an_unknown_context_lists_the_contexts_and_the_same_command_here(admin):
    data = refusal(admin, "nowhere/products")
    assert data["closeCommands"] == ["shop/Products"]
    assert data["problem"] == "unknown_context"
    assert data["contexts"] == ["shop", "help"]


def test_go_to_an_unknown_context_lists_the_contexts(admin):
    data = refusal(admin, "shop/go_to_context <context>attic</context>")
    assert data["problem"] == "unknown_context"
    assert data["contexts"] == ["shop", "help"]
    assert resolve(admin, "shop/go_to_context <context> help </context>").parameters == {"context": "help"}


def test_built_ins_exist_in_every_context(admin):
    for context in ("shop", "help"):
        for name in ("what_is_current_context", "list_commands"):
            assert resolve(admin, f"{context}/{name}").command.scopes == frozenset()


def test_a_viewer_is_refused_a_query_and_does_not_see_it(viewer):
    with pytest.raises(InsufficientScope) as caught:
        resolve(viewer, "shop/Products <category>x</category>")
    assert caught.value.data == {
        "required": ["data_agent:write", "ontologies:read"],
        "missing": ["data_agent:write"],
    }
    names = [
        c.qualified_name
        for c in commands_visible(
            tenant_id=viewer.tenant_id, context="shop", granted=viewer.scopes, enabled_toolsets=ALL
        )
    ]
    assert names == ["shop/Me", "shop/what_is_current_context", "shop/go_to_context", "shop/list_commands"]


def test_a_viewer_is_refused_a_write_tool(viewer):
    with pytest.raises(InsufficientScope):
        resolve(viewer, "shop/Rename <display_name>x</display_name>")


def test_a_disabled_toolset_hides_its_commands(admin):
    data = refusal(admin, "shop/Products <category>x</category>", enabled=NO_DATA_AGENT)
    assert data["problem"] == "unknown_command"
    names = [
        c.qualified_name
        for c in commands_visible(
            tenant_id=admin.tenant_id,
            context=None,
            granted=admin.scopes,
            enabled_toolsets=frozenset({"account"}),
        )
    ]
    assert "shop/Products" not in names
    assert "shop/Me" in names
    assert "shop/Rename" in names
    assert refusal(admin, "shop/Me", enabled=frozenset())["problem"] == "unknown_command"


def test_visible_commands_are_in_order_with_scopes_and_built_ins(admin):
    commands = commands_visible(
        tenant_id=admin.tenant_id, context=None, granted=admin.scopes, enabled_toolsets=ALL
    )
    assert [c.qualified_name for c in commands] == [
        "shop/Products",
        "shop/Typed",
        "shop/Me",
        "shop/Rename",
        "shop/what_is_current_context",
        "shop/go_to_context",
        "shop/list_commands",
        "help/Where",
        "help/what_is_current_context",
        "help/go_to_context",
        "help/list_commands",
    ]
    by_name = {c.qualified_name: c for c in commands}
    assert by_name["shop/Products"].scopes == {"ontologies:read", "data_agent:write"}
    assert by_name["shop/Me"].scopes == {"mcp:read"}
    go = by_name["help/go_to_context"]
    assert [(p.name, p.type, p.required) for p in go.parameters] == [("context", "string", True)]
    assert go.examples == ("help/go_to_context <context>shop</context>",)
    assert all(c.description and c.examples for c in commands if "_" in c.name)


def test_a_tool_the_deployment_does_not_serve_is_not_visible(admin):

    WorkflowCommand.objects.filter(name="Me").update(tool_name="gone_tool")
    assert refusal(admin, "shop/Me")["problem"] == "unknown_command"


def test_another_tenants_workflow_is_never_seen(admin, tenant):
    other = TenantFactory.create(slug="globex")
    stranger = identity_for(MembershipFactory(user=UserFactory(username="sam"), tenant=other, role="admin"))
    with pytest.raises(NotFound) as caught:
        resolve(stranger, "shop/Me")
    assert caught.value.message == NO_WORKFLOW
    with pytest.raises(NotFound):
        workflow_view(tenant_id=other.pk)
    with pytest.raises(NotFound):
        first_context(tenant_id=other.pk)
    # Its own workflow, with the same names, never mixes with acme's.
    sample_with_workflow(other, EVERY_KIND.replace("Every kind", "Globex kind"))
    assert workflow_view(tenant_id=other.pk).name == "Globex kind"
    assert workflow_view(tenant_id=tenant.pk).name == "Every kind"
    assert resolve(stranger, "shop/Me").workflow.tenant_id == other.pk
    # A command pointed (by a mistake in the admin) at another tenant's ontology never runs on it.
    theirs = Ontology.objects.get(tenant=other, name="Acme sales")
    WorkflowCommand.objects.filter(context__workflow__tenant=tenant, name="Products").update(ontology=theirs)
    with pytest.raises(NotFound):
        resolve(admin, "shop/Products <category>x</category>")


def test_workflow_view_and_first_context(admin, tenant):
    view = workflow_view(tenant_id=tenant.pk)
    assert (view.name, view.purpose) == ("Every kind", "Tests.")
    assert [(c.name, c.description) for c in view.contexts] == [("shop", "The shop."), ("help", "Help.")]
    assert first_context(tenant_id=tenant.pk) == "shop"


def test_a_query_whose_ontology_is_gone_or_not_ready(admin, tenant):
    ontology = Ontology.objects.get(tenant=tenant, name="Acme sales")
    Ontology.objects.filter(pk=ontology.pk).update(status=OntologyStatus.CREATING)
    # As data_agent answers run_query: an ontology not ready is as unknown as a missing one.
    with pytest.raises(NotFound):
        resolve(admin, "shop/Products <category>x</category>")
    ontology.delete()
    with pytest.raises(NotFound):
        resolve(admin, "shop/Products <category>x</category>")


def test_a_command_may_not_take_a_built_ins_name(tenant):
    sample_with_workflow(tenant)
    source = DEMO.read_text().replace("name: WhereAmI", "name: List_Commands")
    with pytest.raises(WorkflowImportFailed) as caught:
        workflow_import(tenant=tenant, source=source)
    assert any("built-in" in p.message for p in caught.value.problems)


def test_the_demo_workflow_resolves_its_own_examples(tenant):
    sample_with_workflow(tenant)
    admin = identity_for(MembershipFactory(user=UserFactory(username="ann"), tenant=tenant, role="admin"))
    examples = [
        (command, example)
        for command in commands_visible(
            tenant_id=tenant.pk, context=None, granted=admin.scopes, enabled_toolsets=ALL
        )
        for example in command.examples
    ]
    # The demo has examples to check, in more than one command.
    assert len({command for command, _ in examples}) > 1
    for command, example in examples:
        assert resolve(admin, example).command == command
