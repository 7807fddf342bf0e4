"""The rollup's tables: per tenant, UTC day and tool; per tenant and day; the same two over every
tenant at once; and which days are rolled up.

Tenants are referred to by model label, as ``core.models`` does: ``core`` imports no app.
"""

from __future__ import annotations

from django.db import models


class RolledUpDay(models.Model):
    """A finished UTC day whose tool calls are in the rollup, for every tenant at once.

    ``calls`` is the number of ``tool.called`` rows of the day the roll-up read (every tenant's, and
    those of no tenant): a later count above it means rows arrived late and the day is rolled again.
    """

    day = models.DateField(primary_key=True)
    calls = models.PositiveBigIntegerField()
    rolled_at = models.DateTimeField()

    class Meta:
        ordering = ["day"]

    def __str__(self) -> str:
        return f"{self.day}: {self.calls} tool calls, rolled up at {self.rolled_at:%Y-%m-%d %H:%M:%S}"


class ToolCallDay(models.Model):
    """One tool's calls in a tenant on a rolled-up day, and how many did not end ``ok``."""

    # The unique constraint's index starts with the tenant: no index of its own.
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    tool = models.CharField(max_length=500)
    calls = models.PositiveIntegerField()
    errors = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "day", "tool"], name="tool_call_day_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.tool}: {self.calls} calls"


class ToolCallDayTotal(models.Model):
    """A tenant's tool calls on a rolled-up day, with the p50/p95 of those that carry a duration.

    A row of its own because percentiles cannot be added up from the tools' rows.
    """

    # The unique constraint's index starts with the tenant: no index of its own.
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    calls = models.PositiveIntegerField()
    errors = models.PositiveIntegerField()
    timed_calls = models.PositiveIntegerField()
    p50_ms = models.FloatField(null=True)
    p95_ms = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "day"], name="tool_call_day_total_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.day}: {self.calls} calls"


class AllTenantsToolCallDay(models.Model):
    """One tool's calls on a rolled-up day over every tenant, and the rows of no tenant, as one.

    Not the sum of ``ToolCallDay``: that has no row for calls of no tenant, and loses a tenant's
    rows with the tenant, while its audit rows stay (``tenant`` set to NULL) and still count here.
    """

    day = models.DateField()
    tool = models.CharField(max_length=500)
    calls = models.PositiveBigIntegerField()
    errors = models.PositiveBigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "tool"], name="all_tenants_tool_call_day_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.tool}: {self.calls} calls in every tenant"


class AllTenantsToolCallDayTotal(models.Model):
    """Every tool call of a rolled-up day (every tenant's and those of none), with the p50/p95 of
    those that carry a duration: percentiles over every tenant cannot be made of each tenant's."""

    day = models.DateField(primary_key=True)
    calls = models.PositiveBigIntegerField()
    errors = models.PositiveBigIntegerField()
    timed_calls = models.PositiveBigIntegerField()
    p50_ms = models.FloatField(null=True)
    p95_ms = models.FloatField(null=True)

    class Meta:
        ordering = ["day"]

    def __str__(self) -> str:
        return f"{self.day}: {self.calls} calls in every tenant"
