from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Tenant


class TerminationReason(models.TextChoices):
    CLIENT = "client", "Ended by the client (DELETE)"
    EXPIRED = "expired", "Idle for longer than the session lifetime"
    OPERATOR = "operator", "Ended by an operator"
    OWNER = "owner", "Ended by its owner (sessions or connected applications page)"


class McpSession(models.Model):
    """One MCP session (the handshake-era ``Mcp-Session-Id``), shared by every server process.

    Nothing about a session lives in a process's memory, so any worker serves any session and a
    worker can die without losing one.
    """

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_sessions")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="mcp_sessions")
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="mcp_sessions"
    )
    scopes = models.CharField(max_length=500, help_text="The scopes in force when the session opened.")
    protocol_version = models.CharField(max_length=32)
    client_name = models.CharField(max_length=200, blank=True)
    client_version = models.CharField(max_length=100, blank=True)
    client_capabilities = models.JSONField(
        default=dict, blank=True, help_text="What the client declared it can do (sampling, elicitation, ...)."
    )
    log_level = models.CharField(max_length=20, blank=True, help_text="Set by the client's logging/setLevel.")
    created = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField()
    terminated_at = models.DateTimeField(null=True, blank=True)
    termination_reason = models.CharField(max_length=20, choices=TerminationReason.choices, blank=True)

    class Meta:
        ordering = ["-last_seen"]
        indexes = [models.Index(fields=["terminated_at", "last_seen"], name="mcp_session_liveness")]

    def __str__(self) -> str:
        return f"{self.id[:12]}… ({self.user} in {self.tenant})"


class TenantToolset(models.Model):
    """A tenant's choice about one toolset; without a row the toolset's own default applies."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="toolsets")
    toolset = models.CharField(max_length=100)
    enabled = models.BooleanField()
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "toolset"]
        constraints = [models.UniqueConstraint(fields=["tenant", "toolset"], name="tenant_toolset_unique")]

    def __str__(self) -> str:
        return f"{self.toolset} {'on' if self.enabled else 'off'} for {self.tenant}"


class RelayedMessage(models.Model):
    """A client's answer too large for a PostgreSQL notification, on its way to the waiting worker.

    Taken (and deleted) by that worker at once; anything left behind is swept with old sessions.
    """

    body = models.JSONField()
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    def __str__(self) -> str:
        return f"relayed message {self.pk}"


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
    tenant = models.ForeignKey(Tenant, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
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

    class Meta:
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


class RateLimitRule(models.Model):
    """An operator's override of a default rate limit (``GATEHOUSE["RATE_LIMITS"]``).

    The most specific rule wins: tenant and target, then tenant, then target, then neither.
    """

    scope = models.CharField(max_length=20, choices=RateLimitScope.choices)
    target = models.CharField(
        max_length=200,
        blank=True,
        help_text="A tool name, or a resource URI prefix; blank applies to every tool or resource.",
    )
    tenant = models.ForeignKey(
        Tenant,
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
        ordering = ["scope", "target"]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "target", "tenant"], name="rate_limit_rule_unique", nulls_distinct=False
            ),
        ]

    def __str__(self) -> str:
        where = f" for {self.tenant}" if self.tenant_id else ""
        return f"{self.scope} {self.target or '*'}: {self.limit} per {self.period_seconds} s{where}"
