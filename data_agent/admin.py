"""Operators connect data sources and curate the ontologies generated from them."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from core.crypto import secret_encrypt
from data_agent.models import (
    AgentPreference,
    Dataset,
    DatasetField,
    DataSource,
    Ontology,
    OntologyStatus,
    Relationship,
)
from data_agent.services import ontology_create_from_source

URL_STORED = "Stored encrypted; never shown. Enter a new URL to replace it."
URL_HELP = "postgresql://user:password@host:5432/database, or sqlite:////absolute/path/file.sqlite3"
GENERATED = "Ontology {name!r} generated: {status}."
GENERATION_FAILED = "Ontology {name!r} failed: {detail}"


class DataSourceForm(forms.ModelForm):
    # Write-only: the stored URL is never rendered back, not even in the password box.
    url = forms.CharField(
        label="Connection URL",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=URL_HELP,
    )

    class Meta:
        model = DataSource
        fields = ["tenant", "name", "kind"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not self.instance.pk and not cleaned.get("url"):
            self.add_error("url", "A new data source needs its connection URL.")
        return cleaned


@admin.register(DataSource)
class DataSourceAdmin(admin.ModelAdmin):
    form = DataSourceForm
    list_display = ["name", "tenant", "kind", "updated"]
    list_filter = ["kind", "tenant"]
    list_select_related = ["tenant"]
    search_fields = ["name", "tenant__slug"]
    readonly_fields = ["url_status", "created", "updated"]
    actions = ["generate_ontology"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["tenant", "name", "kind", "url", *(["url_status", "created", "updated"] if obj else [])]

    @admin.display(description="Stored URL")
    def url_status(self, source: DataSource) -> str:
        return URL_STORED

    def save_model(self, request: HttpRequest, obj: DataSource, form: Any, change: bool) -> None:
        url = form.cleaned_data.get("url")
        if url:
            obj.url_encrypted = secret_encrypt(plaintext=url)
        super().save_model(request, obj, form, change)

    @admin.action(description="Generate ontology from this data source", permissions=["change"])
    def generate_ontology(self, request: HttpRequest, queryset: QuerySet[DataSource]) -> None:
        stamp = timezone.now().strftime("%Y-%m-%d %H:%M:%S")
        for source in queryset.select_related("tenant"):
            ontology = ontology_create_from_source(
                tenant=source.tenant, data_source=source, name=f"{source.name} ({stamp})"
            )
            if ontology.status == OntologyStatus.READY:
                self.message_user(
                    request, GENERATED.format(name=ontology.name, status=ontology.status), messages.SUCCESS
                )
            else:
                self.message_user(
                    request,
                    GENERATION_FAILED.format(name=ontology.name, detail=ontology.status_detail),
                    messages.ERROR,
                )


class DatasetInline(admin.TabularInline):
    model = Dataset
    extra = 0
    fields = ["name", "description", "source_schema", "source_table"]
    show_change_link = True


class RelationshipInline(admin.TabularInline):
    model = Relationship
    extra = 0
    raw_id_fields = ["from_field", "to_field"]


@admin.register(Ontology)
class OntologyAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "data_source", "status", "updated"]
    list_filter = ["status", "tenant"]
    list_select_related = ["tenant", "data_source"]
    search_fields = ["name", "description", "tenant__slug"]
    fields = [
        "id",
        "tenant",
        "data_source",
        "name",
        "description",
        "status",
        "status_detail",
        "created",
        "updated",
    ]
    readonly_fields = ["id", "tenant", "data_source", "status_detail", "created", "updated"]
    inlines = [DatasetInline, RelationshipInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Ontologies come from a data source (its "Generate ontology" action), then are edited here.
        return False


class DatasetFieldInline(admin.TabularInline):
    model = DatasetField
    extra = 0
    fields = ["name", "type", "description", "source_column"]


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "ontology", "source_table"]
    list_filter = ["ontology__tenant"]
    list_select_related = ["ontology", "ontology__tenant"]
    search_fields = ["name", "description", "source_table"]
    raw_id_fields = ["ontology"]
    inlines = [DatasetFieldInline]


@admin.register(AgentPreference)
class AgentPreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "tenant", "default_time_period", "updated")
    list_filter = ("tenant",)
    search_fields = ("user__username", "default_time_period", "notes")
    autocomplete_fields = ("user",)
    list_select_related = ("user", "tenant")
