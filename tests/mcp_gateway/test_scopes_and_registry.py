from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from accounts.models import Role
from accounts.scopes import SCOPE_READ, SCOPE_WRITE, RoleScopesBackend, scopes_for_role, scopes_granted
from data_agent.scopes import SCOPE_DATA_AGENT_WRITE, SCOPE_ONTOLOGIES_READ
from llm_gateway.scopes import SCOPE_LLM_INVOKE, SCOPE_USAGE_READ
from mcp_gateway.kernel.rbac import missing_scopes
from mcp_gateway.kernel.registry import Registry, Toolset, registry_load, resource_prefix, tool
from workflows.scopes import SCOPE_WORKFLOWS_AGENT, SCOPE_WORKFLOWS_READ, SCOPE_WORKFLOWS_RUN


def test_a_viewer_holds_only_the_read_scope():
    assert scopes_for_role(role=Role.VIEWER) == {
        SCOPE_READ,
        SCOPE_ONTOLOGIES_READ,
        SCOPE_WORKFLOWS_READ,
        SCOPE_WORKFLOWS_RUN,
    }


@pytest.mark.parametrize("role", [Role.ADMIN, Role.CONTRIBUTOR])
def test_admins_and_contributors_hold_read_and_write(role):
    # Only admins read what the tenant spent on models.
    spending = {SCOPE_USAGE_READ} if role == Role.ADMIN else set()
    assert scopes_for_role(role=role) - spending == {
        SCOPE_READ,
        SCOPE_WRITE,
        SCOPE_ONTOLOGIES_READ,
        SCOPE_DATA_AGENT_WRITE,
        SCOPE_WORKFLOWS_READ,
        SCOPE_WORKFLOWS_RUN,
        SCOPE_WORKFLOWS_AGENT,
        SCOPE_LLM_INVOKE,
    }


def test_granted_scopes_are_the_requested_ones_the_role_allows():
    assert scopes_granted(requested=[SCOPE_WRITE, SCOPE_READ, "unknown"], role=Role.VIEWER) == [SCOPE_READ]
    assert scopes_granted(requested=[SCOPE_WRITE], role=Role.VIEWER) == []


def test_the_dot_backend_publishes_every_scope_with_its_words():
    backend = RoleScopesBackend()
    assert set(backend.get_available_scopes()) == {
        SCOPE_READ,
        SCOPE_WRITE,
        SCOPE_ONTOLOGIES_READ,
        SCOPE_DATA_AGENT_WRITE,
        SCOPE_WORKFLOWS_READ,
        SCOPE_WORKFLOWS_RUN,
        SCOPE_WORKFLOWS_AGENT,
        SCOPE_LLM_INVOKE,
        SCOPE_USAGE_READ,
    }
    assert backend.get_all_scopes()[SCOPE_READ].startswith("See who you are")


def test_missing_scopes_is_set_difference():
    assert missing_scopes(required=frozenset({"a", "b"}), granted=frozenset({"b", "c"})) == {"a"}


async def _noop() -> None:
    return None


def test_the_registry_refuses_a_tool_defined_twice():
    spec = tool(name="dup", description="d", scopes=[SCOPE_READ])(_noop)
    with pytest.raises(ImproperlyConfigured, match="two toolsets"):
        Registry(
            [
                Toolset(name="a", description="", tools=(spec,)),
                Toolset(name="b", description="", tools=(spec,)),
            ]
        )


def test_the_registry_refuses_a_tool_needing_an_unknown_scope():
    spec = tool(name="odd", description="d", scopes=["nope:never"])(_noop)
    with pytest.raises(ImproperlyConfigured, match="unregistered scopes"):
        Registry([Toolset(name="a", description="", tools=(spec,))])


def test_the_registry_refuses_resources_needing_an_unknown_scope():
    resources = resource_prefix(uri="odd://", scopes=["nope:never"])
    with pytest.raises(ImproperlyConfigured, match="unregistered scopes"):
        Registry([Toolset(name="a", description="", resources=(resources,))])


def test_the_data_agent_declares_the_catalogue_scope_for_its_resources():
    registry = registry_load(module_paths=["data_agent.toolset"])
    assert registry.resource_scopes("gatehouse://ontologies/some-id") == {SCOPE_ONTOLOGIES_READ}
    assert registry.resource_scopes("test://static-text") == frozenset()


def test_the_registry_refuses_a_module_without_a_toolset():
    with pytest.raises(ImproperlyConfigured, match="must define"):
        registry_load(module_paths=["core.errors"])


def test_the_account_toolset_declares_its_scopes_next_to_its_tools():
    registry = registry_load(module_paths=["mcp_gateway.toolsets.account"])
    whoami, set_display_name = registry.get("whoami"), registry.get("set_display_name")
    assert whoami is not None
    assert whoami.scopes == {SCOPE_READ}
    assert set_display_name is not None
    assert set_display_name.scopes == {SCOPE_WRITE}
    assert set_display_name.read_only is False
