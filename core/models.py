"""Product-wide records: the audit trail and operators' rate-limit rules.

Both tables keep the names they were created with under ``mcp_gateway`` (``db_table``), so moving
the models here changed no data (migration ``core.0001``). Tenants and OAuth clients are referred
to by model label, never imported: ``core`` imports no app of Gatehouse's.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditAction(models.TextChoices):
    SESSION_CREATED = "session.created", "MCP session created"
    SESSION_TERMINATED = "session.terminated", "MCP session terminated"
    RESOURCE_READ = "resource.read", "Resource read"
    TOOL_CALLED = "tool.called", "Tool called"
    PERMISSION_DENIED = "permission.denied", "Permission denied"
    RATE_LIMITED = "rate.limited", "Rate limited"
    LOGIN_SUCCEEDED = "login.succeeded", "Login succeeded"
    LOGIN_FAILED = "login.failed", "Login failed"
    CONSENT_GRANTED = "consent.granted", "Consent granted"
    CONSENT_DENIED = "consent.denied", "Consent denied"
    CLIENT_REGISTERED = "client.registered", "OAuth client registered"
    CLIENT_DELETED = "client.deleted", "OAuth client deleted"
    TOKEN_ISSUED = "token.issued", "Token issued"
    TOKEN_REFRESHED = "token.refreshed", "Token refreshed"
    TOKEN_REVOKED = "token.revoked", "Token revoked"
    # Refusals before any tool runs, and failures: each is evidence an operator may need.
    TOKEN_REJECTED = "token.rejected", "Bearer token refused"
    SESSION_REFUSED = "session.refused", "MCP session refused (unknown or not the caller's)"
    REQUEST_REFUSED = "request.refused", "Request refused (Host, Origin or malformed)"
    CONSENT_TAMPERED = "consent.tampered", "Consent form tampered with"
    CLIENT_UPDATED = "client.updated", "OAuth client updated"
    CODE_REPLAYED = "code.replayed", "Authorization code replayed"
    SERVER_ERROR = "server.error", "Server error"
    WORKFLOW_COMMAND = "workflow.command", "Workflow command run"
    LLM_INVOKED = "llm.invoked", "Language model called (LLM gateway)"
    MODEL_CALLED = "model.called", "Model call (any feature)"
    # People and their access, managed by the tenant: sign-in's own rows are LOGIN_*.
    PASSWORD_RESET_REQUESTED = "password.reset_requested", "Password reset requested"
    PASSWORD_RESET = "password.reset", "Password reset"
    INVITATION_SENT = "invitation.sent", "Invitation sent"
    INVITATION_ACCEPTED = "invitation.accepted", "Invitation accepted"
    INVITATION_REVOKED = "invitation.revoked", "Invitation revoked"
    MEMBER_ROLE_CHANGED = "member.role_changed", "Member's role changed"
    MEMBER_REMOVED = "member.removed", "Member removed"
    ACCESS_ENDED = "access.ended", "A person's sessions and tokens ended"
    # What a tenant's admins change in the console (and operators in the admin).
    TOOLSET_SWITCHED = "toolset.switched", "Toolset switched on or off"
    MODEL_CHANGED = "model.changed", "Language model added, changed or removed"
    BUDGET_CHANGED = "budget.changed", "Budget added, changed or removed"
    UPSTREAM_CHANGED = "upstream.changed", "Upstream server added, changed or removed"
    IDENTITY_PROVIDER_CHANGED = "identity_provider.changed", "Identity provider settings changed"


class AuditOutcome(models.TextChoices):
    OK = "ok", "Succeeded"
    ERROR = "error", "Failed"
    DENIED = "denied", "Refused"


class AuditEvent(models.Model):
    """One thing that happened, for operators: who, in which tenant, through which client and
    session, from where, and how it ended. Rows are only ever added (and purged after retention).

    Identity is kept twice, as links (for filtering) and as text (``username``, ``client_id``), so
    an event stays readable after its user or client is deleted.
    """

    created = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=40, choices=AuditAction.choices)
    outcome = models.CharField(max_length=10, choices=AuditOutcome.choices, default=AuditOutcome.OK)
    tenant = models.ForeignKey(
        "accounts.Tenant", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    username = models.CharField(max_length=150, blank=True)
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    client_id = models.CharField(max_length=255, blank=True)
    session_id = models.CharField(max_length=64, blank=True)
    request_id = models.CharField(max_length=128, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    target = models.CharField(max_length=500, blank=True, help_text="The tool, resource or client acted on.")
    duration_ms = models.FloatField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    # Set by the writer (core.audit.entry), so a row retried or replayed from the spool is stored
    # once; empty on rows written before it existed.
    event_id = models.UUIDField(null=True, blank=True, unique=True, editable=False)

    class Meta:
        db_table = "mcp_gateway_auditevent"
        ordering = ["-created", "-id"]
        indexes = [
            models.Index(fields=["tenant", "created"], name="audit_tenant_created"),
            models.Index(fields=["user", "created"], name="audit_user_created"),
            models.Index(fields=["action", "created"], name="audit_action_created"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.outcome} by {self.username or '-'} at {self.created:%Y-%m-%d %H:%M:%S}"


class RateLimitScope(models.TextChoices):
    TOOL = "tool", "Tool calls (per user and tool)"
    RESOURCE = "resource", "Resource reads (per user)"
    AUTHORIZE = "authorize", "Authorization endpoint (per IP)"
    LOGIN = "login", "Login attempts (per IP and username)"
    REGISTER = "register", "Client registration (per IP)"
    MODEL = "model", "Model calls (per user and feature)"
    PASSWORD_RESET = "password_reset", "Password reset requests (per IP and address)"


class RateLimitRule(models.Model):
    """An operator's override of a default rate limit (``RATE_LIMITS``, core.conf).

    The most specific rule wins: tenant and target, then tenant, then target, then neither.
    """

    scope = models.CharField(max_length=20, choices=RateLimitScope.choices)
    target = models.CharField(
        max_length=200,
        blank=True,
        help_text="A tool name, or a resource URI prefix; blank applies to every tool or resource.",
    )
    tenant = models.ForeignKey(
        "accounts.Tenant",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="rate_limit_rules",
        help_text="Blank applies to every tenant. Ignored for the per-IP scopes.",
    )
    limit = models.PositiveIntegerField(help_text="Requests allowed per period; 0 refuses every request.")
    period_seconds = models.PositiveIntegerField(default=60)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "mcp_gateway_ratelimitrule"
        ordering = ["scope", "target"]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "target", "tenant"], name="rate_limit_rule_unique", nulls_distinct=False
            ),
        ]

    def __str__(self) -> str:
        where = f" for {self.tenant}" if self.tenant_id else ""
        return f"{self.scope} {self.target or '*'}: {self.limit} per {self.period_seconds} s{where}"


from core.audit.rollup.models import RolledUpDay, ToolCallDay, ToolCallDayTotal  # noqa: E402,F401
