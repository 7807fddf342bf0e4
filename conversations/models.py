"""A person's conversations with a tenant's workflow, their turns, and where each MCP session stands.

Everything here lives in the database, never in a process: a turn started on one worker is seen
(and refused as a conflict) on another, and conversations survive restarts.

``SessionBinding`` plays the MCP session's part for the workflow tools: its key is the handshake
era's session id, or, on 2026-07-28 where there is no session, the (person, tenant, OAuth client)
triple, so the tools behave the same in both eras.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from accounts.models import Tenant
from mcp_gateway.models import McpSession

TOPIC_MAX_CHARS = 200
SUMMARY_MAX_CHARS = 4_000
REQUEST_MAX_CHARS = 8_000
FEEDBACK_MAX_CHARS = 4_000
BINDING_KEY_MAX_CHARS = 300
CONTEXT_MAX_CHARS = 63


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="conversations")
    # The OAuth client it was started from: on 2026-07-28 a client finds its active one by it.
    client_id = models.CharField(max_length=255, blank=True)
    topic = models.CharField(max_length=TOPIC_MAX_CHARS, blank=True)
    # The topic folded (case and spaces ignored): unique per person, so two topics never look alike.
    topic_key = models.CharField(max_length=TOPIC_MAX_CHARS, blank=True, editable=False)
    summary = models.TextField(max_length=SUMMARY_MAX_CHARS, blank=True)
    # Set when the summary was derived from the turns, not written by the tenant's model.
    summary_derived = models.BooleanField(default=False)
    created = models.DateTimeField(default=timezone.now, editable=False)
    updated = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-updated"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "topic_key"], condition=~Q(topic_key=""), name="conversation_topic_unique"
            )
        ]
        indexes = [models.Index(fields=["user", "tenant", "-updated"], name="conversation_recent")]

    def __str__(self) -> str:
        return self.topic or f"Conversation {str(self.id)[:8]}"


class TurnKind(models.TextChoices):
    AGENT = "agent", "Agent"
    ASSISTANT = "assistant", "Assistant"
    COMMAND = "command", "Command"


class Turn(models.Model):
    """One request and its answer, written whole when the turn ends (a turn that timed out or failed
    unexpectedly leaves no row)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    kind = models.CharField(max_length=10, choices=TurnKind.choices)
    request = models.TextField(max_length=REQUEST_MAX_CHARS)
    # The CommandOutput the client received, traces apart.
    output = models.JSONField(default=dict)
    # The trace events, in order: {timestamp, direction, raw_command, command_name, parameters, ...}.
    traces = models.JSONField(default=list, blank=True)
    success = models.BooleanField(default=False)
    duration_ms = models.FloatField(default=0)
    feedback_score = models.FloatField(null=True, blank=True)
    feedback_text = models.TextField(max_length=FEEDBACK_MAX_CHARS, blank=True)
    feedback_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["conversation", "created", "id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.request[:60]}"


class SessionBinding(models.Model):
    """Where one MCP session (or, on 2026-07-28, one person's client) stands: its current context,
    its active conversation, and whether a turn is running."""

    key = models.CharField(primary_key=True, max_length=BINDING_KEY_MAX_CHARS, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    # The handshake-era session it stands for (none on 2026-07-28): purged sessions take theirs along.
    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="bindings"
    )
    context = models.CharField(max_length=CONTEXT_MAX_CHARS, blank=True)
    # A turn holds the binding until then; any worker refuses a second turn before it (conflict).
    turn_until = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now, editable=False)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["updated"], name="session_binding_updated")]

    def __str__(self) -> str:
        return self.key
