"""A tenant's own library of papers: one of the literature search's sources, filled from BibTeX
(``research.bibtex``: the admin's import and ``manage.py import_bibtex``)."""

from __future__ import annotations

from django.db import models

from accounts.models import Tenant

TITLE_MAX_CHARS = 1000
VENUE_MAX_CHARS = 500
DOI_MAX_CHARS = 300
KEY_MAX_CHARS = 200
URL_MAX_CHARS = 2000
ABSTRACT_MAX_CHARS = 20000


class LibraryPaper(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="library_papers")
    title = models.CharField(max_length=TITLE_MAX_CHARS)
    # research.records.title_normalize(title): how duplicates are found.
    title_key = models.CharField(max_length=TITLE_MAX_CHARS, db_index=True)
    authors = models.JSONField(default=list)
    year = models.IntegerField(null=True, blank=True)
    venue = models.CharField(max_length=VENUE_MAX_CHARS, blank=True)
    # Normalised (research.records.doi_normalize); blank when the entry has none.
    doi = models.CharField(max_length=DOI_MAX_CHARS, blank=True)
    abstract = models.TextField(blank=True)
    url = models.URLField(max_length=URL_MAX_CHARS, blank=True)
    # The BibTeX entry's key and type, as imported.
    bibtex_key = models.CharField(max_length=KEY_MAX_CHARS, blank=True)
    entry_type = models.CharField(max_length=40, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("title",)
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "doi"], condition=~models.Q(doi=""), name="library_one_doi_per_tenant"
            ),
        ]
        indexes = [models.Index(fields=["tenant", "title_key"], name="library_tenant_title")]

    def __str__(self) -> str:
        return self.title[:100]
