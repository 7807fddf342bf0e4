from __future__ import annotations

from django.conf import settings
from django.db import models

from accounts.models import Tenant

# session_new_id makes 43 characters; the column leaves room, and nothing longer is a session id.
SESSION_ID_MAX_LENGTH = 64
# What a client declares its name and version to be is cut to these (``session_open``).
CLIENT_NAME_MAX_LENGTH = 200
CLIENT_VERSION_MAX_LENGTH = 100


class TerminationReason(models.TextChoices):
    CLIENT = "client", "Ended by the client (DELETE)"
    EXPIRED = "expired", "Idle for longer than the session lifetime"
    OPERATOR = "operator", "Ended by an operator"
    OWNER = "owner", "Ended by its owner (sessions or connected applications page)"
    TENANT = "tenant", "Its tenant was deactivated"


class McpSession(models.Model):
    """One MCP session (the handshake-era ``Mcp-Session-Id``), shared by every server process.

    Nothing about a session lives in a process's memory, so any worker serves any session and a
    worker can die without losing one.
    """

    id = models.CharField(primary_key=True, max_length=SESSION_ID_MAX_LENGTH, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_sessions")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="mcp_sessions")
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="mcp_sessions"
    )
    scopes = models.CharField(max_length=500, help_text="The scopes in force when the session opened.")
    protocol_version = models.CharField(max_length=32)
    client_name = models.CharField(max_length=CLIENT_NAME_MAX_LENGTH, blank=True)
    client_version = models.CharField(max_length=CLIENT_VERSION_MAX_LENGTH, blank=True)
    client_capabilities = models.JSONField(
        default=dict, blank=True, help_text="What the client declared it can do (sampling, elicitation, ...)."
    )
    log_level = models.CharField(max_length=20, blank=True, help_text="Set by the client's logging/setLevel.")
    created = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField()
    terminated_at = models.DateTimeField(null=True, blank=True)
    termination_reason = models.CharField(max_length=20, choices=TerminationReason.choices, blank=True)

    class Meta:
        # Django's default would read "Mcp session" in the admin.
        verbose_name = "MCP session"
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


class ChangeKind(models.TextChoices):
    TOOLSET = "toolset", "A toolset turned on or off"
    UPSTREAM = "upstream", "An upstream server's lists changed"
    RESOURCE = "resource", "A resource's content changed"
    RESOURCES_LIST = "resources_list", "The list of resources changed"


# A client's resumption (``Last-Event-ID``) reaches this far back; older changes are purged.
CHANGE_LOG_KEEP_HOURS = 24
# Kept to the length a resource URI is allowed in a subscription (``resource_subscriptions``).
RESOURCE_URI_MAX_LENGTH = 2000


class ChangeEvent(models.Model):
    """One change a tenant's clients are told of, in the order it was written.

    Its id is the SSE event id on the standalone stream, so a client that reconnects with
    ``Last-Event-ID`` (to any worker) hears what it missed. Written by triggers (toolsets) and by
    ``changes.change_record``; a trigger on this table sends the ``NOTIFY`` (migration 0014). The
    tenant is a plain id, not a foreign key: a tenant's deletion writes changes of its own rows.
    """

    id = models.BigAutoField(primary_key=True)
    tenant_id = models.BigIntegerField()
    kind = models.CharField(max_length=20, choices=ChangeKind.choices)
    toolset = models.CharField(max_length=100, blank=True)
    uri = models.CharField(max_length=RESOURCE_URI_MAX_LENGTH, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["tenant_id", "id"], name="change_event_tenant_id")]

    def __str__(self) -> str:
        return f"change {self.pk}: {self.kind} for tenant {self.tenant_id}"


class ResourceSubscription(models.Model):
    """A handshake-era session's ``resources/subscribe``: its standalone stream hears
    ``notifications/resources/updated`` for this URI, whichever worker holds the stream."""

    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="resource_subscriptions")
    uri = models.CharField(max_length=RESOURCE_URI_MAX_LENGTH)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "uri"], name="resource_subscription_unique")
        ]

    def __str__(self) -> str:
        return f"{self.uri} for session {self.session_id[:12]}…"
