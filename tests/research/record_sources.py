"""Record the literature sources' answers again, from the live APIs, into tests/research/recordings/.

The recordings in this repository were written in each API's documented response shape (the
machines that built Gatehouse reach no API but PyPI's), with real papers' metadata. On a machine
that reaches OpenAlex, Crossref and arXiv, this script replaces each file with what the API answers
today to the request the file stands for, so the replay tests run on genuine answers:

    .venv/bin/python -m tests.research.record_sources [--only openalex|crossref|arxiv] [--dry-run]

A request that fails leaves its file as it was and is reported; the exit code is 1 if any did.
Review the diff before committing: a source that changed its shape should fail the replay tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

RECORDINGS = Path(__file__).parent / "recordings"
USER_AGENT = "Gatehouse-recordings/1 (https://github.com/; mailto:maintainers@example.org)"


@dataclass(frozen=True)
class Recording:
    file: str
    url: str
    params: dict[str, str]


RECORDINGS_MADE = (
    Recording(
        "openalex/works_search.json",
        "https://api.openalex.org/works",
        {"search": "transformer attention language", "per-page": "5"},
    ),
    Recording(
        "openalex/work_doi_10.1109_cvpr.2016.90.json",
        "https://api.openalex.org/works/doi:10.1109/cvpr.2016.90",
        {},
    ),
    Recording(
        "crossref/works_query.json",
        "https://api.crossref.org/works",
        {"query": "transformer language model", "rows": "4"},
    ),
    Recording(
        "crossref/work_10.1109_cvpr.2016.90.json", "https://api.crossref.org/works/10.1109/cvpr.2016.90", {}
    ),
    Recording(
        "crossref/work_10.18653_v1_n19-1423.json", "https://api.crossref.org/works/10.18653/v1/n19-1423", {}
    ),
    Recording(
        "arxiv/query.xml",
        "https://export.arxiv.org/api/query",
        {"search_query": "all:transformer", "max_results": "6"},
    ),
    Recording("arxiv/id_1706.03762.xml", "https://export.arxiv.org/api/query", {"id_list": "1706.03762"}),
    Recording("arxiv/empty.xml", "https://export.arxiv.org/api/query", {"id_list": "9999.99999"}),
    Recording("arxiv/error.xml", "https://export.arxiv.org/api/query", {"id_list": "not-an-id"}),
)


def record(recording: Recording, *, client: httpx.Client, dry_run: bool) -> str | None:
    """Fetch one recording; the problem, or None when it was written (or would be)."""
    try:
        response = client.get(recording.url, params=recording.params)
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}"
    # arXiv answers its error feed with 400 for a malformed id; that answer is the recording.
    if response.status_code >= 500 or (
        response.status_code >= 400 and not recording.file.endswith("error.xml")
    ):
        return f"HTTP {response.status_code}"
    body = response.content
    if recording.file.endswith(".json"):
        body = (json.dumps(response.json(), indent=1, ensure_ascii=False) + "\n").encode()
    if not dry_run:
        (RECORDINGS / recording.file).write_bytes(body)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("openalex", "crossref", "arxiv"))
    parser.add_argument("--dry-run", action="store_true", help="fetch, but write nothing")
    arguments = parser.parse_args(argv)
    failed = 0
    with httpx.Client(timeout=30, headers={"User-Agent": USER_AGENT}, follow_redirects=True) as client:
        for recording in RECORDINGS_MADE:
            if arguments.only and not recording.file.startswith(arguments.only + "/"):
                continue
            problem = record(recording, client=client, dry_run=arguments.dry_run)
            print(f"{recording.file}: {problem or 'recorded'}")
            failed += problem is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
