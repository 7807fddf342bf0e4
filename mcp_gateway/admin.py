from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.admin import TenantAdmin
from accounts.models import Tenant, User
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.sessions import session_terminate
from mcp_gateway.kernel.toolset_access import toolset_set_enabled
from mcp_gateway.models import McpSession, TenantToolset, TerminationReason

TERMINATED_MESSAGE = "Terminated {count} session(s)."
TOOLSET_FIXED = "A row is one toolset's: to switch another, add a row for it."


class _LiveFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "Live"), ("ended", "Ended")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "live":
            return queryset.filter(terminated_at__isnull=True)
        if self.value() == "ended":
            return queryset.filter(terminated_at__isnull=False)
        return queryset


@admin.register(McpSession)
class McpSessionAdmin(admin.ModelAdmin):
    list_display = [
        "short_id",
        "user",
        "tenant",
        "application",
        "client_name",
        "protocol_version",
        "created",
        "last_seen",
        "terminated_at",
        "termination_reason",
    ]
    list_filter = [
        _LiveFilter,
        "tenant",
        # Every dynamically registered client is an application; list only those with sessions.
        ("application", admin.RelatedOnlyFieldListFilter),
        ("created", admin.DateFieldListFilter),
        "termination_reason",
        "protocol_version",
    ]
    list_select_related = ["user", "tenant", "application"]
    search_fields = ["id", "user__username", "client_name"]
    actions = ["terminate"]

    @admin.display(description="Session")
    def short_id(self, session: McpSession) -> str:
        return f"{session.id[:12]}…"

    # Sessions are opened by clients and changed by the endpoint; operators look and terminate.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_terminate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("mcp_gateway.change_mcpsession")

    @admin.action(description="Terminate the selected sessions", permissions=["terminate"])
    def terminate(self, request: HttpRequest, queryset: QuerySet[McpSession]) -> None:
        live = list(queryset.filter(terminated_at__isnull=True).values_list("pk", flat=True))
        for session_id in live:
            session_terminate(session_id=session_id, reason=TerminationReason.OPERATOR)
        self.message_user(request, TERMINATED_MESSAGE.format(count=len(live)), messages.SUCCESS)


class TenantToolsetForm(forms.ModelForm):
    class Meta:
        model = TenantToolset
        fields = ["toolset", "enabled"]

    def clean_toolset(self) -> str:
        toolset: str = self.cleaned_data["toolset"]
        if self.instance.pk and toolset != self.instance.toolset:
            raise forms.ValidationError(TOOLSET_FIXED)
        return toolset


class TenantToolsetInline(admin.TabularInline):
    """Saved by ``TenantWithToolsetsAdmin.save_formset`` through ``toolset_set_enabled``, as the
    console and ``manage.py toolsets`` switch a toolset: each switch audited with the operator."""

    model = TenantToolset
    form = TenantToolsetForm
    extra = 0
    fields = ["toolset", "enabled", "updated"]
    readonly_fields = ["updated"]
    # Switch a toolset off (or on) instead: a deleted row would change the state unaudited.
    can_delete = False

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "toolset":
            # Offer the toolsets this deployment serves, not free text.
            choices = [(t.name, f"{t.name}: {t.description}") for t in default_registry().toolsets]
            return forms.ChoiceField(choices=choices, label="Toolset")
        return super().formfield_for_dbfield(db_field, request, **kwargs)


class TenantWithToolsetsAdmin(TenantAdmin):
    """The tenant page of ``accounts``, with the toolsets this app serves: accounts knows no toolset."""

    inlines = [*TenantAdmin.inlines, TenantToolsetInline]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        if formset.model is not TenantToolset:
            super().save_formset(request, form, formset, change)
            return
        assert isinstance(request.user, User)
        tenant, registry = form.instance, default_registry()
        # What the admin's change message and history read, as formset.save() would have set them.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        for row_form in formset.forms:
            if not row_form.has_changed():
                continue
            toolset, enabled = row_form.cleaned_data["toolset"], row_form.cleaned_data["enabled"]
            if not toolset_set_enabled(
                tenant=tenant, toolset=toolset, enabled=enabled, registry=registry, by=request.user
            ):
                continue
            row = TenantToolset.objects.get(tenant=tenant, toolset=toolset)
            if row_form.instance.pk:
                formset.changed_objects.append((row, row_form.changed_data))
            else:
                formset.new_objects.append(row)


admin.site.unregister(Tenant)
admin.site.register(Tenant, TenantWithToolsetsAdmin)
