"""Shared by the workflow execution tests: the sample database with the demo workflow, a test
workflow with every kind of command, and identities by role."""

from __future__ import annotations

import textwrap

from accounts.scopes import scopes_for_role
from core.identity import Identity
from data_agent.sample import sample_database_ensure
from tests.support.factories import ApplicationFactory
from tests.workflows.test_workflow_import import DEMO
from workflows.services import workflow_import

EVERY_KIND = textwrap.dedent(
    """\
    name: Every kind
    description: One command of each kind.
    purpose: Tests.
    contexts:
      - name: shop
        description: The shop.
        commands:
          - name: Products
            description: Products of a category whose name starts with a prefix.
            parameters:
              - name: category
                type: string
                required: true
                description: The category.
              - name: prefix
                type: string
                required: false
                default: ""
                description: The start of the name.
              - name: limit
                type: integer
                required: false
                default: 3
                description: How many.
            examples:
              - shop/Products <category>rockets</category>
            query:
              ontology: Acme sales
              sql: >-
                SELECT name FROM products WHERE category = :category AND name LIKE :prefix || '%'
                AND name NOT LIKE '%(x)s' ORDER BY name LIMIT :limit
          - name: Typed
            description: Every type, echoed.
            parameters:
              - {name: n, type: integer, required: true}
              - {name: x, type: number, required: true}
              - {name: b, type: boolean, required: false, default: false}
              - {name: d, type: date, required: true}
            query:
              ontology: Acme sales
              sql: SELECT :n AS n, :x AS x, :b AS b, :d AS d FROM regions LIMIT 1
          - name: Me
            tool:
              name: whoami
              arguments: {}
          - name: Rename
            description: Set my display name.
            parameters:
              - {name: display_name, type: string, required: true}
            tool:
              name: set_display_name
              arguments: {display_name: display_name}
      - name: help
        description: Help.
        commands:
          - name: Where
            builtin: what_is_current_context
    """
)


def sample_with_workflow(tenant, source: str | None = None):
    """The tenant's real sample database (data_agent enabled) and a workflow over it."""
    ontology = sample_database_ensure(tenant=tenant)
    workflow_import(tenant=tenant, source=source if source is not None else DEMO.read_text())
    return ontology


def identity_for(membership, *, role: str | None = None) -> Identity:
    role = role or membership.role
    application = ApplicationFactory.create()
    return Identity(
        user_id=membership.user.pk,
        username=membership.user.username,
        tenant_id=membership.tenant.pk,
        tenant_slug=membership.tenant.slug,
        tenant_name=membership.tenant.name,
        role=role,
        scopes=scopes_for_role(role=role),
        application_id=application.pk,
        client_id=application.client_id,
        client_name=application.name,
        token_id=0,
    )
