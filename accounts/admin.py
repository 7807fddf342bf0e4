from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django.http import HttpRequest
from django.utils import timezone

from accounts.invitations.selectors import invitation_state
from accounts.models import Invitation, Membership, Tenant, User
from accounts.sign_in import admin as sign_in_admin  # noqa: F401  (registers its admin)


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


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "is_active", "created"]
    list_filter = ["is_active"]
    search_fields = ["slug", "name"]
    prepopulated_fields = {"slug": ["name"]}
    # mcp_gateway.admin adds the tenant's toolsets to this page.
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created"]
    list_editable = ["role"]
    list_filter = ["role", "tenant"]
    list_select_related = ["user", "tenant"]
    search_fields = ["user__username", "user__email", "tenant__slug", "tenant__name"]
    autocomplete_fields = ["user", "tenant"]


INVITATION_FIELDS = (
    "tenant",
    "email",
    "role",
    "invited_by",
    "created",
    "expires",
    "accepted_at",
    "accepted_by",
    "revoked_at",
)


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Read-only: an invitation is sent by a tenant admin from the members page (which emails its
    link); the token's hash is never shown. An operator may delete one, which ends its link."""

    list_display = ["email", "tenant", "role", "state", "invited_by", "created", "expires"]
    list_filter = ["role", "tenant"]
    list_select_related = ["tenant", "invited_by"]
    search_fields = ["email", "tenant__slug", "tenant__name"]
    fields = INVITATION_FIELDS
    readonly_fields = INVITATION_FIELDS

    @admin.display(description="State")
    def state(self, invitation: Invitation) -> str:
        return invitation_state(invitation=invitation, now=timezone.now()).value

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Invitation | None = None) -> bool:
        return False
