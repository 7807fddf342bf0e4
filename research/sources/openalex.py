"""OpenAlex (https://docs.openalex.org): every discipline's works, free, no key.

``/works?search=`` ranks by relevance over titles, abstracts and full text; abstracts come as an
inverted index (word → positions, for copyright reasons) that is turned back into text here.
"""

from __future__ import annotations

from urllib.parse import quote

from core.conf import gatehouse_settings
from research.records import Paper, doi_normalize
from research.sources.base import SearchPlan
from research.sources.http import (
    ABSTRACT_MAX_CHARS,
    AUTHORS_MAX,
    TITLE_MAX_CHARS,
    clean,
    json_get,
    polite_params,
    shape_error,
    year_of,
)

NAME = "OpenAlex"
PER_PAGE_MAX = 200
# More positions than this in an abstract's index is not an abstract.
ABSTRACT_WORDS_MAX = 5000


def abstract_from_index(index: object) -> str:
    """The text of an ``abstract_inverted_index`` ({"word": [0, 5], ...}); '' when not one."""
    if not isinstance(index, dict):
        return ""
    placed: list[tuple[int, str]] = []
    for word, positions in index.items():
        if not isinstance(word, str) or not isinstance(positions, list):
            continue
        for position in positions:
            if (
                isinstance(position, int)
                and not isinstance(position, bool)
                and 0 <= position < ABSTRACT_WORDS_MAX
            ):
                placed.append((position, word))
            if len(placed) > ABSTRACT_WORDS_MAX:
                break
    placed.sort(key=lambda item: item[0])
    return clean(" ".join(word for _, word in placed), max_chars=ABSTRACT_MAX_CHARS)


def _paper(work: object) -> Paper | None:
    if not isinstance(work, dict):
        raise shape_error(NAME)
    title = clean(work.get("title") or work.get("display_name"), max_chars=TITLE_MAX_CHARS)
    doi = doi_normalize(work.get("doi"))
    if not title and not doi:
        return None
    authors: list[str] = []
    authorships = work.get("authorships")
    for authorship in authorships if isinstance(authorships, list) else []:
        author = authorship.get("author") if isinstance(authorship, dict) else None
        name = clean(author.get("display_name")) if isinstance(author, dict) else ""
        if name:
            authors.append(name)
        if len(authors) >= AUTHORS_MAX:
            break
    location = work.get("primary_location")
    venue, url = "", ""
    if isinstance(location, dict):
        host = location.get("source")
        venue = clean(host.get("display_name")) if isinstance(host, dict) else ""
        url = clean(location.get("landing_page_url"), max_chars=2000)
    openalex_id = clean(work.get("id")).rsplit("/", 1)[-1]
    return Paper(
        title=title or f"DOI {doi}",
        authors=tuple(authors),
        year=year_of(work.get("publication_year")),
        venue=venue,
        doi=doi,
        abstract=abstract_from_index(work.get("abstract_inverted_index")),
        url=url if url.startswith(("https://", "http://")) else (f"https://doi.org/{doi}" if doi else ""),
        sources=("openalex",),
        ids={"openalex": openalex_id} if openalex_id else {},
    )


def _year_filter(plan: SearchPlan) -> str:
    if plan.year_from is not None and plan.year_to is not None:
        return f"publication_year:{plan.year_from}-{plan.year_to}"
    if plan.year_from is not None:
        return f"publication_year:>{plan.year_from - 1}"
    if plan.year_to is not None:
        return f"publication_year:<{plan.year_to + 1}"
    return ""


class OpenAlexSource:
    name = "openalex"
    title = "OpenAlex"

    def search(self, *, plan: SearchPlan, tenant_id: int, limit: int) -> list[Paper]:
        base = gatehouse_settings.RESEARCH_OPENALEX_URL.rstrip("/")
        papers: list[Paper] = []
        # A page of records without titles or DOIs adds nothing; the page count still ends the loop.
        for page in range(1, -(-limit // PER_PAGE_MAX) + 1):
            per_page = min(PER_PAGE_MAX, limit - len(papers))
            if per_page <= 0:
                break
            params: dict[str, str | int] = {"search": plan.query_text(), "per-page": per_page, "page": page}
            year_filter = _year_filter(plan)
            if year_filter:
                params["filter"] = year_filter
            answer = json_get(source=NAME, url=f"{base}/works", params=polite_params(**params))
            results = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(results, list):
                raise shape_error(NAME)
            papers.extend(paper for paper in map(_paper, results) if paper is not None)
            if len(results) < per_page:
                break
        return papers[:limit]

    def lookup_doi(self, *, doi: str, tenant_id: int) -> Paper | None:
        doi = doi_normalize(doi)
        if not doi:
            return None
        base = gatehouse_settings.RESEARCH_OPENALEX_URL.rstrip("/")
        work = json_get(
            source=NAME,
            url=f"{base}/works/doi:{quote(doi, safe='/:;()')}",
            params=polite_params(),
            missing_ok=True,
        )
        if work is None:
            return None
        return _paper(work)


source = OpenAlexSource()
