"""Replacing a tenant's workflow from a YAML file, and writing it back out as one.

The import is all or nothing: every problem is reported with its line, and only a file with none
replaces the workflow, inside one transaction.
"""

from __future__ import annotations

import uuid
from typing import Any

import yaml
from django.db import transaction

from accounts.models import Tenant
from core.errors import InvalidInput, NotFound
from data_agent.models import Ontology
from workflows.importing import ImportProblem, WorkflowSpec, workflow_parse
from workflows.models import ActionKind, Workflow, WorkflowCommand, WorkflowContext
from workflows.rules import ONTOLOGY_UNKNOWN, sql_gate_errors


class WorkflowImportFailed(InvalidInput):
    """The file was refused; ``problems`` lists each one with its line."""

    def __init__(self, problems: list[ImportProblem]) -> None:
        self.problems = problems
        super().__init__(
            f"The workflow file has {len(problems)} problem(s).",
            data={"problems": [{"line": p.line, "message": p.message} for p in problems]},
        )


def _ontology_for_tenant(*, tenant: Tenant, reference: str) -> Ontology | None:
    """The tenant's ontology by name or id; another tenant's id is as unknown as a made-up one."""
    ontologies = Ontology.objects.filter(tenant=tenant).select_related("data_source")
    try:
        by_id = ontologies.filter(pk=uuid.UUID(reference)).first()
    except ValueError:
        by_id = None
    return by_id or ontologies.filter(name=reference).first()


def _resolve_ontologies(
    *, tenant: Tenant, spec: WorkflowSpec
) -> tuple[dict[str, Ontology], list[ImportProblem]]:
    found: dict[str, Ontology] = {}
    problems = []
    for context in spec.contexts:
        for command in context.commands:
            if command.action != ActionKind.QUERY or command.ontology in found:
                continue
            ontology = _ontology_for_tenant(tenant=tenant, reference=command.ontology)
            if ontology is None:
                problems.append(
                    ImportProblem(command.line, f"{context.name}/{command.name}: {ONTOLOGY_UNKNOWN}")
                )
            else:
                found[command.ontology] = ontology
    for context in spec.contexts:
        for command in context.commands:
            ontology = found.get(command.ontology) if command.action == ActionKind.QUERY else None
            if ontology is None:
                continue
            # The gate that will run the query checks it now, so a file cannot hold a query that
            # could never run (a write, a table outside the ontology, a function not allowed).
            for message in sql_gate_errors(command.sql, ontology=ontology):
                problems.append(ImportProblem(command.sql_line, f"{context.name}/{command.name}: {message}"))
    return found, problems


def workflow_import(*, tenant: Tenant, source: str) -> Workflow:
    """Replace ``tenant``'s workflow with the one in ``source``, or raise WorkflowImportFailed."""
    spec, problems = workflow_parse(source=source)
    if spec is None:
        raise WorkflowImportFailed(problems)
    ontologies, problems = _resolve_ontologies(tenant=tenant, spec=spec)
    if problems:
        raise WorkflowImportFailed(problems)
    with transaction.atomic():
        Workflow.objects.filter(tenant=tenant).delete()
        workflow = Workflow.objects.create(
            tenant=tenant, name=spec.name, description=spec.description, purpose=spec.purpose
        )
        for context_order, context_spec in enumerate(spec.contexts):
            context = WorkflowContext.objects.create(
                workflow=workflow,
                name=context_spec.name,
                description=context_spec.description,
                order=context_order,
            )
            WorkflowCommand.objects.bulk_create(
                WorkflowCommand(
                    context=context,
                    order=order,
                    name=c.name,
                    description=c.description,
                    parameters=c.parameters,
                    examples=c.examples,
                    action=c.action,
                    tool_name=c.tool_name,
                    tool_arguments=c.tool_arguments,
                    ontology=ontologies.get(c.ontology) if c.action == ActionKind.QUERY else None,
                    sql=c.sql,
                    builtin=c.builtin,
                )
                for order, c in enumerate(context_spec.commands)
            )
    return workflow


def _command_document(command: WorkflowCommand) -> dict[str, Any]:
    document: dict[str, Any] = {"name": command.name}
    if command.description:
        document["description"] = command.description
    if command.parameters:
        document["parameters"] = command.parameters
    if command.examples:
        document["examples"] = command.examples
    if command.action == ActionKind.TOOL:
        document["tool"] = {"name": command.tool_name, "arguments": command.tool_arguments}
    elif command.action == ActionKind.QUERY:
        # By name: ontology ids differ between deployments, names are what a person wrote.
        document["query"] = {
            "ontology": command.ontology.name if command.ontology else "",
            "sql": command.sql,
        }
    else:
        document["builtin"] = command.builtin
    return document


def workflow_export(*, tenant: Tenant) -> str:
    """``tenant``'s workflow as YAML that imports back to the same workflow; NotFound if none."""
    workflow = Workflow.objects.filter(tenant=tenant).first()
    if workflow is None:
        raise NotFound(f"The tenant {tenant.slug} has no workflow.")
    contexts = workflow.contexts.prefetch_related("commands__ontology").order_by("order", "name")
    document = {
        "name": workflow.name,
        "description": workflow.description,
        "purpose": workflow.purpose,
        "contexts": [
            {
                "name": context.name,
                "description": context.description,
                "commands": [_command_document(c) for c in context.commands.all().order_by("order", "name")],
            }
            for context in contexts
        ],
    }
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)
