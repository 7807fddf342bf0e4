"""What Gatehouse keeps of an upstream's OAuth sign-in (``AuthKind.OAUTH_CODE``): one row per
upstream, with the tokens and the dynamically registered client encrypted (``core.crypto``), who
connected it and when, and the one connect attempt under way, if any.

The attempt lives in the same row so that "one attempt per upstream at a time" is a row lock, and
so that a callback landing on another worker than the one waiting for it reaches the waiter
through the database: the callback writes the code (encrypted) here, the waiter polls for it.
Only a hash of the attempt's ``state`` is stored, so a reader of the table cannot complete it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AttemptOutcome(models.TextChoices):
    NONE = "", "No attempt"
    # The connect thread is discovering the server, or waiting for the admin's browser.
    PENDING = "pending", "Waiting for the sign-in"
    # The callback delivered a code (or an error); the connect thread takes it from here.
    DELIVERED = "delivered", "Sign-in received"
    CONNECTED = "connected", "Connected"
    FAILED = "failed", "Failed"


class UpstreamGrant(models.Model):
    upstream = models.OneToOneField("upstreams.Upstream", on_delete=models.CASCADE, related_name="grant")
    tokens_encrypted = models.TextField(blank=True, editable=False)
    # A client registered dynamically (or by URL, CIMD) with the upstream's authorization server;
    # a pre-registered one is the upstream's own client id and secret, never copied here.
    client_info_encrypted = models.TextField(blank=True, editable=False)
    scope = models.CharField(max_length=1000, blank=True)
    connected_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    connected_at = models.DateTimeField(null=True, blank=True)
    # The attempt under way (or the last one): its own id (a new one supersedes it), who started it,
    # until when it may last, the sha256 of the SDK's state once the browser was sent, what the
    # callback delivered (encrypted JSON), and how it ended.
    attempt_id = models.CharField(max_length=64, blank=True)
    attempt_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    attempt_expires = models.DateTimeField(null=True, blank=True)
    attempt_state_hash = models.CharField(max_length=64, blank=True, db_index=True)
    attempt_delivery_encrypted = models.TextField(blank=True, editable=False)
    attempt_outcome = models.CharField(max_length=12, choices=AttemptOutcome.choices, blank=True)
    attempt_error = models.CharField(max_length=500, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "upstreams"
        verbose_name = "upstream OAuth sign-in"

    def __str__(self) -> str:
        return f"sign-in of {self.upstream_id}"

    @property
    def connected(self) -> bool:
        return bool(self.tokens_encrypted)
