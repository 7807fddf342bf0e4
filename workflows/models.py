"""A tenant's workflow: contexts, and the commands each context offers.

One workflow per tenant: the MCP tools speak of "the tenant's workflow", and an import replaces it
whole. Rules every path shares (the YAML import, the admin) live in ``workflows.rules``, called
from ``clean`` here and from the importer with line numbers.
"""

from __future__ import annotations

from django.db import models

from accounts.models import Tenant
from data_agent.models import Ontology
from workflows import rules, scopes  # noqa: F401  (registers the scopes)


class Workflow(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="workflows")
    name = models.CharField(max_length=rules.NAME_MAX_CHARS)
    description = models.TextField(max_length=rules.TEXT_MAX_CHARS, blank=True)
    purpose = models.TextField(max_length=rules.TEXT_MAX_CHARS, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug"]
        constraints = [models.UniqueConstraint(fields=["tenant"], name="workflow_one_per_tenant")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"

    def clean(self) -> None:
        rules.raise_if_any(
            {
                "name": rules.title_errors(self.name),
                "description": rules.text_errors(self.description),
                "purpose": rules.text_errors(self.purpose),
            }
        )


class WorkflowContext(models.Model):
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="contexts")
    name = models.CharField(max_length=rules.NAME_MAX_CHARS)
    description = models.TextField(max_length=rules.TEXT_MAX_CHARS, blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["workflow", "order", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workflow", "name"], name="workflow_context_name_unique")
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        rules.raise_if_any(
            {"name": rules.context_name_errors(self.name), "description": rules.text_errors(self.description)}
        )


class ActionKind(models.TextChoices):
    TOOL = "tool", "Tool"
    QUERY = "query", "Query"
    BUILTIN = "builtin", "Built-in"


class Builtin(models.TextChoices):
    WHAT_IS_CURRENT_CONTEXT = "what_is_current_context", "What is the current context"
    GO_TO_CONTEXT = "go_to_context", "Go to context"
    LIST_COMMANDS = "list_commands", "List commands"


class WorkflowCommand(models.Model):
    context = models.ForeignKey(WorkflowContext, on_delete=models.CASCADE, related_name="commands")
    name = models.CharField(max_length=rules.NAME_MAX_CHARS)
    description = models.TextField(max_length=rules.TEXT_MAX_CHARS, blank=True)
    order = models.PositiveIntegerField(default=0)
    # [{name, type, required, description, default}], checked by rules.parameters_errors.
    parameters = models.JSONField(default=list, blank=True)
    # Command texts in the command syntax, each naming this command and only declared parameters.
    examples = models.JSONField(default=list, blank=True)
    action = models.CharField(max_length=10, choices=ActionKind.choices)
    tool_name = models.CharField(max_length=rules.NAME_MAX_CHARS, blank=True)
    # {tool argument: parameter name}: the tool's arguments are filled from the command's.
    tool_arguments = models.JSONField(default=dict, blank=True)
    # SET_NULL, not CASCADE: deleting an ontology must not silently delete commands; the command
    # then says its ontology is gone when it runs, and the admin shows it as invalid.
    ontology = models.ForeignKey(Ontology, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    # Named parameters (:region) are bound by the executor, never pasted into the text.
    sql = models.TextField(max_length=rules.SQL_MAX_CHARS, blank=True)
    builtin = models.CharField(max_length=30, choices=Builtin.choices, blank=True)

    class Meta:
        ordering = ["context", "order", "name"]
        constraints = [
            models.UniqueConstraint(fields=["context", "name"], name="workflow_command_name_unique")
        ]

    def __str__(self) -> str:
        return self.qualified_name

    @property
    def qualified_name(self) -> str:
        return f"{self.context.name}/{self.name}" if self.context_id else self.name

    def clean(self) -> None:
        errors: dict[str, list[str]] = {
            "name": rules.command_name_errors(self.name),
            "description": rules.text_errors(self.description),
            "parameters": rules.parameters_errors(self.parameters),
        }
        params = self.parameters if not errors["parameters"] else []
        if self.context_id:
            errors["examples"] = rules.examples_errors(
                self.examples, qualified_name=self.qualified_name, parameters=params
            )
        if self.action == ActionKind.TOOL:
            errors["tool_name"] = rules.tool_name_errors(self.tool_name)
            errors["tool_arguments"] = rules.tool_arguments_errors(self.tool_arguments, parameters=params)
        elif self.action == ActionKind.QUERY:
            errors["sql"] = rules.sql_errors(self.sql, parameters=params)
            if self.ontology is None or (
                self.context_id and self.ontology.tenant_id != self.context.workflow.tenant_id
            ):
                errors["ontology"] = [rules.ONTOLOGY_UNKNOWN]
            elif not errors["sql"]:
                errors["sql"] = rules.sql_gate_errors(self.sql, ontology=self.ontology)
        elif self.action == ActionKind.BUILTIN and not self.builtin:
            errors["builtin"] = ["Choose the built-in this command runs."]
        rules.raise_if_any(errors)
