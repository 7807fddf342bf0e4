from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.http import HttpRequest

from accounts.models import Membership, RememberedConsent, Tenant, User
from mcp_gateway.models import TenantToolset
from mcp_gateway.registry import default_registry


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user", "tenant"]


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    inlines = [MembershipInline]
    fieldsets = [
        *(BaseUserAdmin.fieldsets or []),
        ("Gatehouse", {"fields": ["display_name"]}),
    ]


class TenantToolsetInline(admin.TabularInline):
    model = TenantToolset
    extra = 0
    fields = ["toolset", "enabled", "updated"]
    readonly_fields = ["updated"]

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "toolset":
            # Offer the toolsets this deployment serves, not free text.
            choices = [(t.name, f"{t.name}: {t.description}") for t in default_registry().toolsets]
            return forms.ChoiceField(choices=choices, label="Toolset")
        return super().formfield_for_dbfield(db_field, request, **kwargs)


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "is_active", "created"]
    list_filter = ["is_active"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline, TenantToolsetInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created"]
    list_editable = ["role"]
    list_filter = ["role", "tenant"]
    list_select_related = ["user", "tenant"]
    search_fields = ["user__username", "user__email", "tenant__slug", "tenant__name"]
    autocomplete_fields = ["user", "tenant"]


@admin.register(RememberedConsent)
class RememberedConsentAdmin(admin.ModelAdmin):
    """What people allowed once and are not asked again; deleting a row makes the next
    authorization show the consent page again (it revokes nothing)."""

    list_display = ["user", "application", "tenant", "scopes", "updated"]
    list_filter = ["tenant"]
    search_fields = ["user__username", "application__name", "application__client_id"]
    list_select_related = ["user", "application", "tenant"]
    readonly_fields = ["user", "application", "tenant", "scopes", "created", "updated"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
