"""Operators edit a tenant's workflow here; the models' ``clean`` applies the import's rules."""

from __future__ import annotations

from django.contrib import admin

from workflows.models import Workflow, WorkflowCommand, WorkflowContext


class WorkflowContextInline(admin.TabularInline):
    model = WorkflowContext
    extra = 0
    fields = ("order", "name", "description")
    show_change_link = True


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ("name", "tenant", "updated")
    list_select_related = ("tenant",)
    search_fields = ("name", "tenant__slug")
    inlines = [WorkflowContextInline]


class WorkflowCommandInline(admin.StackedInline):
    model = WorkflowCommand
    extra = 0
    fields = (
        ("order", "name", "action"),
        "description",
        "parameters",
        "examples",
        ("tool_name", "tool_arguments"),
        ("ontology", "sql"),
        "builtin",
    )
    autocomplete_fields = ("ontology",)


@admin.register(WorkflowContext)
class WorkflowContextAdmin(admin.ModelAdmin):
    list_display = ("name", "workflow", "order")
    list_select_related = ("workflow__tenant",)
    search_fields = ("name", "workflow__name", "workflow__tenant__slug")
    inlines = [WorkflowCommandInline]
