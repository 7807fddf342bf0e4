"""A human-in-the-loop job: long work that stops at checkpoints for a person's decision.

The row is the whole truth about a job. A step runs in a task on the task queue (``jobs.steps``);
reaching a checkpoint stores it here and ends the task; a decision (``jobs.services``) stores itself
in ``JobDecision`` and enqueues the next step in the same transaction. Nothing lives in a process,
so any worker can take any step, a restart loses nothing, and a job can wait for weeks.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from accounts.models import Tenant

KIND_MAX_CHARS = 40
STEP_MAX_CHARS = 40
CHECKPOINT_KIND_MAX_CHARS = 40
ACTION_MAX_CHARS = 20
NOTE_MAX_CHARS = 2000
ERROR_MAX_CHARS = 2000
PROGRESS_MESSAGE_MAX_CHARS = 200
# What identifies the caller's MCP session (handshake era) or client (2026-07-28).
ORIGIN_MAX_CHARS = 300


class JobState(models.TextChoices):
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting for a decision"
    COMPLETE = "complete", "Complete"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


FINISHED_STATES = frozenset({JobState.COMPLETE, JobState.FAILED, JobState.CANCELLED})


class DecisionAction(models.TextChoices):
    APPROVE = "approve", "Approve"
    EDIT = "edit", "Edit"
    REJECT = "reject", "Reject"


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="jobs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs")
    # Where it was started: the MCP session (handshake era) or the OAuth client, for the record.
    origin = models.CharField(max_length=ORIGIN_MAX_CHARS, blank=True)
    client_id = models.CharField(max_length=ORIGIN_MAX_CHARS, blank=True)
    kind = models.CharField(max_length=KIND_MAX_CHARS)
    input = models.JSONField(default=dict)
    state = models.CharField(max_length=10, choices=JobState.choices, default=JobState.RUNNING)
    # One more for each decision that does not complete the job.
    iteration = models.PositiveIntegerField(default=0)
    # Steps finished so far; it only grows, so a client's progress bar never goes back.
    progress = models.PositiveIntegerField(default=0)
    progress_message = models.CharField(max_length=PROGRESS_MESSAGE_MAX_CHARS, blank=True)
    # The pending checkpoint while ``state`` is waiting; empty otherwise.
    checkpoint_kind = models.CharField(max_length=CHECKPOINT_KIND_MAX_CHARS, blank=True)
    checkpoint = models.JSONField(null=True, blank=True)
    # When each recent checkpoint was first shown to the person (jobs.checkpoints).
    checkpoints_shown = models.JSONField(default=list, blank=True)
    # The kind's working state between steps (the plan, the candidates, ...).
    context = models.JSONField(default=dict)
    # The step to run while ``state`` is running, and the token of the task enqueued for it: a task
    # whose token is no longer the job's (cancelled, recovered, run already) does nothing.
    step = models.CharField(max_length=STEP_MAX_CHARS, blank=True)
    step_token = models.UUIDField(null=True, blank=True)
    step_task_id = models.CharField(max_length=64, blank=True)
    # The worker running the step and its last heartbeat; a stale heartbeat means the worker died
    # and the step is enqueued again (jobs.recovery).
    step_worker = models.CharField(max_length=64, blank=True)
    step_heartbeat = models.DateTimeField(null=True, blank=True)
    step_attempts = models.PositiveSmallIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created",)
        indexes = [
            models.Index(fields=["tenant", "user", "-created"], name="jobs_owner_recent"),
            models.Index(fields=["state", "step_heartbeat"], name="jobs_running_heartbeat"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED_STATES


class JobDecision(models.Model):
    """One decision at one checkpoint: append-only, the job's history."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="decisions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    iteration = models.PositiveIntegerField()
    checkpoint_kind = models.CharField(max_length=CHECKPOINT_KIND_MAX_CHARS)
    action = models.CharField(max_length=ACTION_MAX_CHARS, choices=DecisionAction.choices)
    data = models.JSONField(null=True, blank=True)
    note = models.TextField(blank=True)
    # "mcp", "web" or "stdio": where the person decided.
    channel = models.CharField(max_length=10, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("created", "id")
        constraints = [
            # A checkpoint is decided once (jobs.checkpoints names it by kind and iteration).
            models.UniqueConstraint(
                fields=["job", "iteration", "checkpoint_kind"], name="jobs_one_decision_per_checkpoint"
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} at {self.checkpoint_kind} ({self.job_id})"
