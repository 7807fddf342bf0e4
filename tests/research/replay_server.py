"""Recorded OpenAlex, Crossref and arXiv answers, served without the internet.

The recordings (tests/research/recordings/) are in each API's documented shape, written by hand with
real papers' metadata because these machines reach no API but PyPI's; tests/research/record_sources.py
makes each one again from the live API where it can be reached. Two ways to use them:

- Unit tests: ``replay_transport()`` is an ``httpx.MockTransport`` answering from the recordings;
  ``tests/research/conftest.py`` installs it behind ``research.sources.http.http_client``.
- End-to-end tests: a real HTTP server on 127.0.0.1, in a thread of the test process::

      server = ReplayServer().start()
      settings = {
          "RESEARCH_OPENALEX_URL": server.url_for("openalex"),   # http://127.0.0.1:PORT/openalex
          "RESEARCH_CROSSREF_URL": server.url_for("crossref"),   # http://127.0.0.1:PORT/crossref
          "RESEARCH_ARXIV_URL": server.url_for("arxiv"),         # http://127.0.0.1:PORT/arxiv/api/query
      }
      server.settings()                      # the same three keys as one dict
      server.set_mode("crossref", "error")   # that source answers HTTP 500 from now on
      server.set_mode("arxiv", "hang")       # that source waits hang_seconds, then answers
      server.set_mode("arxiv", "hang", hang_seconds=3)   # ... or this source's own delay
      server.set_mode("arxiv", "ok")         # back to the recordings
      server.requests("openalex")            # [(path, {param: [values]}), ...] it was asked
      server.stop()                          # also releases requests still hanging

  ``ReplayServer(hang_seconds=30.0)`` sets how long "hang" waits (set the app's
  RESEARCH_HTTP_TIMEOUT_SECONDS below it to see a timeout). It is also a context manager
  (``with ReplayServer() as server:``).

What is answered (any other path is a 404):

- OpenAlex ``GET /works?search=...``: works_search.json (Attention Is All You Need, BERT,
  Transformer-XL, RoBERTa, ViT), filtered by ``filter=publication_year:A-B|>A|<B`` and cut to
  ``per-page`` (pages after the first are empty). ``GET /works/doi:<doi>``: that work (ResNet
  10.1109/cvpr.2016.90 has its own recording; the search's works are found too), else 404.
- Crossref ``GET /works?query=...``: works_query.json (BERT, Transformer-XL, HF Transformers, Swin),
  filtered by ``filter=from-pub-date:Y,until-pub-date:Y``, cut to ``rows``. ``GET /works/<doi>``:
  BERT (10.18653/v1/n19-1423) or ResNet (10.1109/cvpr.2016.90), or a search item, else 404
  "Resource not found.".
- arXiv ``GET /api/query?search_query=...``: query.xml (Attention, BERT, Transformer-XL, ViT, GPT-3,
  ResNet), filtered by ``submittedDate:[YYYY... TO YYYY...]`` and cut to ``max_results``;
  ``id_list=1706.03762``: that paper; a malformed id: arXiv's error feed; another id: an empty feed.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import httpx

RECORDINGS = Path(__file__).parent / "recordings"
SOURCES = ("openalex", "crossref", "arxiv")
MODES = ("ok", "error", "hang")
PREFIXES = {"openalex": "/openalex", "crossref": "/crossref", "arxiv": "/arxiv"}
JSON = "application/json; charset=utf-8"
ATOM = "application/atom+xml; charset=utf-8"
Answer = tuple[int, str, bytes]
_ARXIV_ID = re.compile(r"^(\d{4}\.\d{4,5}|[a-z.-]+/\d{7})(v\d+)?$")


def _read(*parts: str) -> bytes:
    return RECORDINGS.joinpath(*parts).read_bytes()


def _json(data: Any, status: int = 200) -> Answer:
    return status, JSON, json.dumps(data, ensure_ascii=False).encode()


def _one(query: dict[str, list[str]], name: str, default: str = "") -> str:
    return query.get(name, [default])[0]


def _int(text: str, default: int) -> int:
    return int(text) if text.isdigit() else default


def _years(low: int | None, high: int | None, year: int | None) -> bool:
    if year is None:
        return low is None and high is None
    return (low is None or year >= low) and (high is None or year <= high)


def _doi_file(doi: str) -> str:
    return doi.lower().replace("/", "_")


def _openalex(path: str, query: dict[str, list[str]]) -> Answer:
    search = json.loads(_read("openalex", "works_search.json"))
    if path == "/works":
        low = high = None
        match = re.fullmatch(r"publication_year:(\d{4})-(\d{4})", _one(query, "filter"))
        if match:
            low, high = int(match.group(1)), int(match.group(2))
        elif match := re.fullmatch(r"publication_year:>(\d{4})", _one(query, "filter")):
            low = int(match.group(1)) + 1
        elif match := re.fullmatch(r"publication_year:<(\d{4})", _one(query, "filter")):
            high = int(match.group(1)) - 1
        results = [w for w in search["results"] if _years(low, high, w["publication_year"])]
        per_page = _int(_one(query, "per-page", "25"), 25)
        page = _int(_one(query, "page", "1"), 1)
        search["results"] = results[:per_page] if page == 1 else []
        search["meta"].update(count=len(results), page=page, per_page=per_page)
        return _json(search)
    if path.startswith("/works/doi:"):
        doi = path.removeprefix("/works/doi:").lower()
        recorded = RECORDINGS / "openalex" / f"work_doi_{_doi_file(doi)}.json"
        if recorded.is_file():
            return 200, JSON, recorded.read_bytes()
        for work in search["results"]:
            if work["doi"] == f"https://doi.org/{doi}":
                return _json(work)
    return _json({"error": "404 Not Found", "message": "The requested URL was not found on the server."}, 404)


def _crossref(path: str, query: dict[str, list[str]]) -> Answer:
    search = json.loads(_read("crossref", "works_query.json"))
    if path == "/works":
        filters = dict(f.split(":", 1) for f in _one(query, "filter").split(",") if ":" in f)
        low = _int(filters.get("from-pub-date", "")[:4], 0) or None
        high = _int(filters.get("until-pub-date", "")[:4], 0) or None
        items = [
            i for i in search["message"]["items"] if _years(low, high, i["published"]["date-parts"][0][0])
        ]
        rows = _int(_one(query, "rows", "20"), 20)
        search["message"].update({"items": items[:rows], "total-results": len(items), "items-per-page": rows})
        return _json(search)
    if path.startswith("/works/"):
        doi = path.removeprefix("/works/").lower()
        recorded = RECORDINGS / "crossref" / f"work_{_doi_file(doi)}.json"
        if recorded.is_file():
            return 200, JSON, recorded.read_bytes()
        for item in search["message"]["items"]:
            if item["DOI"] == doi:
                return _json(
                    {"status": "ok", "message-type": "work", "message-version": "1.0.0", "message": item}
                )
    return 404, "text/plain", b"Resource not found."


def _feed_cut(feed: str, *, keep: int, low: int | None, high: int | None) -> str:
    head, *entries = feed.split("  <entry>\n")
    tail = ""
    if entries:
        entries[-1], tail = entries[-1].split("</feed>")
        tail = "</feed>" + tail
    kept = []
    for entry in entries:
        year = int(re.search(r"<published>(\d{4})", entry).group(1))  # type: ignore[union-attr]
        if _years(low, high, year):
            kept.append(entry)
    return head + "".join(f"  <entry>\n{entry}" for entry in kept[:keep]) + (tail or "")


def _arxiv(path: str, query: dict[str, list[str]]) -> Answer:
    if path != "/api/query":
        return 404, "text/plain", b"Not found"
    id_list = _one(query, "id_list")
    if id_list:
        if not _ARXIV_ID.match(id_list):
            return 200, ATOM, _read("arxiv", "error.xml")
        recorded = RECORDINGS / "arxiv" / f"id_{id_list.split('v')[0]}.xml"
        return (
            200,
            ATOM,
            (recorded if recorded.is_file() else RECORDINGS / "arxiv" / "empty.xml").read_bytes(),
        )
    if not _one(query, "search_query"):
        return 200, ATOM, _read("arxiv", "error.xml")
    low = high = None
    match = re.search(r"submittedDate:\[(\d{4})\d* TO (\d{4})\d*\]", _one(query, "search_query"))
    if match:
        low, high = int(match.group(1)), int(match.group(2))
    feed = _read("arxiv", "query.xml").decode()
    keep = _int(_one(query, "max_results", "10"), 10)
    return 200, ATOM, _feed_cut(feed, keep=keep, low=low, high=high).encode()


def replay_answer(source: str, path: str, query: dict[str, list[str]]) -> Answer:
    """(status, content type, body) for a GET of ``path`` (below the source's base URL)."""
    route = {"openalex": _openalex, "crossref": _crossref, "arxiv": _arxiv}[source]
    return route(unquote(path), query)


def _split(url: str) -> tuple[str, str, dict[str, list[str]]] | None:
    parts = urlsplit(url)
    for source, prefix in PREFIXES.items():
        if parts.path == prefix or parts.path.startswith(prefix + "/"):
            return source, parts.path[len(prefix) :], parse_qs(parts.query)
    return None


def replay_transport() -> httpx.MockTransport:
    """Answers requests to ``http://replay.test/<source>...`` (any host) from the recordings."""

    def handle(request: httpx.Request) -> httpx.Response:
        split = _split(str(request.url))
        if split is None:
            return httpx.Response(404, text="Not found")
        status, content_type, body = replay_answer(*split)
        return httpx.Response(status, headers={"Content-Type": content_type}, content=body)

    return httpx.MockTransport(handle)


def replay_urls(base: str = "http://replay.test") -> dict[str, str]:
    """The settings pointing each source at ``base`` (the transport's or a server's)."""
    return {
        "RESEARCH_OPENALEX_URL": f"{base}/openalex",
        "RESEARCH_CROSSREF_URL": f"{base}/crossref",
        "RESEARCH_ARXIV_URL": f"{base}/arxiv/api/query",
    }


class ReplayServer:
    """A local HTTP server answering from the recordings; see the module's docstring."""

    def __init__(self, *, hang_seconds: float = 30.0) -> None:
        self.hang_seconds = hang_seconds
        self._modes = dict.fromkeys(SOURCES, "ok")
        self._delays = dict.fromkeys(SOURCES, hang_seconds)
        self._requests: dict[str, list[tuple[str, dict[str, list[str]]]]] = {s: [] for s in SOURCES}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ReplayServer:
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                replay._answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="replay-server", daemon=True)
        self._thread.start()
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def url_for(self, source: str) -> str:
        return replay_urls(self.base_url)[f"RESEARCH_{source.upper()}_URL"]

    def settings(self) -> dict[str, str]:
        """RESEARCH_OPENALEX_URL, RESEARCH_CROSSREF_URL and RESEARCH_ARXIV_URL for this server."""
        return replay_urls(self.base_url)

    def set_mode(self, source: str, mode: str, *, hang_seconds: float | None = None) -> None:
        """``hang_seconds``: this source's delay in "hang" mode (default: the server's)."""
        if source not in SOURCES or mode not in MODES:
            raise ValueError(f"source one of {SOURCES}, mode one of {MODES}")
        with self._lock:
            self._modes[source] = mode
            self._delays[source] = self.hang_seconds if hang_seconds is None else hang_seconds

    def requests(self, source: str) -> list[tuple[str, dict[str, list[str]]]]:
        with self._lock:
            return list(self._requests[source])

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        split = _split(handler.path)
        if split is None:
            status, content_type, body = 404, "text/plain", b"Not found"
        else:
            source, path, query = split
            with self._lock:
                mode, delay = self._modes[source], self._delays[source]
                self._requests[source].append((path, query))
            # After the delay it answers from the recordings; stop() ends the wait at once.
            if mode == "hang" and self._stopping.wait(delay):
                return
            if mode == "error":
                status, content_type, body = 500, "text/plain", b"Internal Server Error"
            else:
                status, content_type, body = replay_answer(source, path, query)
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            pass  # the client gave up (its timeout), as a hang test expects
