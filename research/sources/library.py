"""The tenant's own library (``LibraryPaper``): offline, and the demo's source."""

from __future__ import annotations

from functools import reduce
from operator import or_

from django.db.models import Q

from research.models import LibraryPaper
from research.records import Paper
from research.sources.base import SearchPlan


def _paper(row: LibraryPaper) -> Paper:
    return Paper(
        title=row.title,
        authors=tuple(row.authors),
        year=row.year,
        venue=row.venue,
        doi=row.doi,
        abstract=row.abstract,
        url=row.url,
        sources=("library",),
        ids={"library": row.bibtex_key or str(row.pk)},
    )


class LibrarySource:
    name = "library"
    title = "Your tenant's library"

    def search(self, *, plan: SearchPlan, tenant_id: int, limit: int) -> list[Paper]:
        rows = LibraryPaper.objects.filter(tenant_id=tenant_id)
        # A paper matches when every word of any one term is in its title or abstract.
        matches = []
        for term in plan.terms:
            words = term.split()
            if words:
                matches.append(
                    reduce(lambda q, w: q & (Q(title__icontains=w) | Q(abstract__icontains=w)), words, Q())
                )
        if matches:
            rows = rows.filter(reduce(or_, matches))
        if plan.year_from is not None:
            rows = rows.filter(year__gte=plan.year_from)
        if plan.year_to is not None:
            rows = rows.filter(year__lte=plan.year_to)
        return [_paper(row) for row in rows.order_by("-year", "title")[:limit]]

    def lookup_doi(self, *, doi: str, tenant_id: int) -> Paper | None:
        row = LibraryPaper.objects.filter(tenant_id=tenant_id, doi=doi).first()
        return _paper(row) if row is not None else None


source = LibrarySource()
