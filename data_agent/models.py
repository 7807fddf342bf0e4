"""Data sources and the ontologies that describe them, per tenant."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from accounts.models import Tenant


class DataSourceKind(models.TextChoices):
    POSTGRES = "postgres", "PostgreSQL"
    SQLITE = "sqlite", "SQLite file"


class OntologyStatus(models.TextChoices):
    CREATING = "creating", "Creating"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class DataSource(models.Model):
    """A tenant's database. Its URL (which carries credentials) is stored Fernet-encrypted only."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="data_sources")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20, choices=DataSourceKind.choices)
    url_encrypted = models.TextField(editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="data_source_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


class Ontology(models.Model):
    """What a data source means: datasets, fields and how they join. Tools see only ready ones."""

    # A UUID: tools take the id as an argument, and it must not be guessable or enumerable.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="ontologies")
    data_source = models.ForeignKey(DataSource, on_delete=models.CASCADE, related_name="ontologies")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    status = models.CharField(max_length=20, choices=OntologyStatus.choices, default=OntologyStatus.CREATING)
    status_detail = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "ontologies"
        ordering = ["tenant__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="ontology_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


class Dataset(models.Model):
    ontology = models.ForeignKey(Ontology, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    source_schema = models.CharField(max_length=200, blank=True)
    source_table = models.CharField(max_length=200)

    class Meta:
        ordering = ["ontology", "name"]
        constraints = [models.UniqueConstraint(fields=["ontology", "name"], name="dataset_name_unique")]

    def __str__(self) -> str:
        return self.name


class DatasetField(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="fields")
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    source_column = models.CharField(max_length=200)

    class Meta:
        ordering = ["dataset", "id"]
        constraints = [models.UniqueConstraint(fields=["dataset", "name"], name="dataset_field_name_unique")]

    def __str__(self) -> str:
        return f"{self.dataset.name}.{self.name}"


class Relationship(models.Model):
    """A join key: ``from_field`` (usually a foreign key) refers to ``to_field``."""

    ontology = models.ForeignKey(Ontology, on_delete=models.CASCADE, related_name="relationships")
    from_field = models.ForeignKey(DatasetField, on_delete=models.CASCADE, related_name="relationships_out")
    to_field = models.ForeignKey(DatasetField, on_delete=models.CASCADE, related_name="relationships_in")

    class Meta:
        ordering = ["ontology", "id"]
        constraints = [models.UniqueConstraint(fields=["from_field", "to_field"], name="relationship_unique")]

    def __str__(self) -> str:
        return f"{self.from_field} → {self.to_field}"


class AgentPreference(models.Model):
    """One person's standing instructions to the data agent in one tenant; the planner reads them
    (a question without a time period gets the default one, for example)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    default_time_period = models.CharField(
        max_length=100,
        blank=True,
        help_text="Used when a question names no period, for example 'last 12 months' or 'this quarter'.",
    )
    notes = models.TextField(
        max_length=1000,
        blank=True,
        help_text="Anything else the agent should assume, for example 'our fiscal year starts in April'.",
    )
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="agent_preference_unique_user_tenant")
        ]

    def __str__(self) -> str:
        return f"Data agent preferences of {self.user} in {self.tenant}"
