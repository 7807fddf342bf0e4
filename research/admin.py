"""Tenants' libraries in the admin: browse and edit papers, and import a BibTeX file for a tenant
(the same service as ``manage.py import_bibtex``, so both report alike)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from accounts.models import Tenant
from core.errors import InvalidInput
from research.bibtex import BIBTEX_MAX_BYTES, bibtex_bytes_decode, library_import_bibtex
from research.models import LibraryPaper

# Skipped entries listed one message each, up to this many; the rest counted in one more.
SKIPPED_SHOWN = 20


class BibtexImportForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("slug"))
    file = forms.FileField(
        label="BibTeX file", help_text=f"A .bib file, UTF-8, at most {BIBTEX_MAX_BYTES // 2**20} MB."
    )

    def clean_file(self) -> str:
        upload = self.cleaned_data["file"]
        try:
            return bibtex_bytes_decode(upload.read(BIBTEX_MAX_BYTES + 1))
        except InvalidInput as error:
            raise forms.ValidationError(error.message) from None


@admin.register(LibraryPaper)
class LibraryPaperAdmin(admin.ModelAdmin):
    list_display = ("title", "tenant", "year", "venue", "doi", "bibtex_key")
    list_filter = ("tenant", "entry_type")
    list_select_related = ("tenant",)
    search_fields = ("title", "doi", "bibtex_key", "venue")
    readonly_fields = ("title_key", "created", "updated")
    ordering = ("tenant__slug", "title")
    # A bare host is read as https, as Django 6 will by default.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="research_librarypaper_import",
            )
        ]
        return own + super().get_urls()

    def import_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request) or not self.has_change_permission(request):
            raise PermissionDenied
        form = BibtexImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            tenant: Tenant = form.cleaned_data["tenant"]
            try:
                report = library_import_bibtex(tenant_id=tenant.pk, text=form.cleaned_data["file"])
            except InvalidInput as error:
                form.add_error("file", error.message)
            else:
                messages.success(request, f"{tenant.slug}: {report.summary()}")
                skipped = report.lines()[1:]
                for line in skipped[:SKIPPED_SHOWN]:
                    messages.warning(request, line)
                if len(skipped) > SKIPPED_SHOWN:
                    messages.warning(request, f"… and {len(skipped) - SKIPPED_SHOWN} more skipped.")
                changelist = reverse("admin:research_librarypaper_changelist")
                return HttpResponseRedirect(f"{changelist}?tenant__id__exact={tenant.pk}")
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": "Import BibTeX",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/research/librarypaper/import.html", context)
