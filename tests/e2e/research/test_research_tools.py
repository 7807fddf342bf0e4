"""The research toolset as a client uses it: the official SDK client over HTTP against Daphne on
PostgreSQL, with a ``manage.py jobs_worker`` running the searches' steps, on acme's own library
(the main server offers no other source, so nothing here reaches the network).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import bibtexparser
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from accounts.models import Tenant
from core.models import AuditEvent, AuditOutcome
from jobs.models import Job
from research.models import LibraryPaper
from research.records import doi_normalize, title_normalize
from tests.e2e.conftest import _in_own_thread
from tests.e2e.harness import Person, sdk_client
from tests.e2e.oauth_driver import minted_sdk_client, minted_token
from tests.e2e.raw_mcp import RawMcp, sse_messages

pytestmark = pytest.mark.django_db

# A word no other paper of the demo's library has, so the searches find these and only these.
PAPERS = (
    ("Quokka marsupial ecology on Rottnest Island", ["Ada Lovelace"], 2019, "10.5555/quokka.1"),
    ("Marsupial quokka population genetics", ["Grace Hopper", "Alan Turing"], 2021, "10.5555/quokka.2"),
    ('A survey of quokka {marsupial} behaviour & diet: 50% of "selfies"', ["Zoë Müller"], 2015, ""),
    ("Quokka tourism and selfies", ["Edsger Dijkstra"], 2020, "10.5555/quokka.4"),
)


@pytest.fixture
def research_on(tenant_toolset, django_db_blocker):
    """The research toolset on for acme and globex, and acme's library holding ``PAPERS``."""
    tenant_toolset("acme", "research", enabled=True)
    tenant_toolset("globex", "research", enabled=True)

    def fill() -> None:
        acme = Tenant.objects.get(slug="acme")
        for title, authors, year, doi in PAPERS:
            LibraryPaper.objects.update_or_create(
                tenant=acme,
                title=title,
                defaults={
                    "title_key": title_normalize(title),
                    "authors": authors,
                    "year": year,
                    "doi": doi_normalize(doi) if doi else "",
                    "venue": "Journal of Quokka Studies",
                    "abstract": "",
                    "entry_type": "article",
                },
            )

    with django_db_blocker.unblock():
        _in_own_thread(fill)


class Progress:
    def __init__(self) -> None:
        self.seen: list[float] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append(progress)


async def _call(client: Any, name: str, arguments: dict[str, Any], progress: Progress | None = None) -> Any:
    result = await client.call_tool(name, arguments, progress_callback=progress)
    assert not result.is_error, result.content
    structured = dict(result.structured_content or {})
    # The text a text-only client hands its model holds the same JSON.
    assert json.loads(result.content[-1].text) == structured
    return structured


def _titles(checkpoint: dict[str, Any]) -> set[str]:
    return {paper["title"] for paper in checkpoint.get("candidates", checkpoint.get("papers", []))}


async def test_a_search_runs_to_completion_with_a_decision_at_each_checkpoint(
    server, jobs_worker, committed, research_on
):
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        progress = Progress()
        started = await _call(client, "search_papers", {"query": "quokka", "max_results": 20}, progress)
        session_id = started["session_id"]
        assert started["checkpoint"]["kind"] == "plan", started
        assert started["checkpoint"]["sources"] == ["library"]
        assert progress.seen
        assert progress.seen == sorted(set(progress.seen))

        state = await _call(client, "get_session", {"session_id": session_id})
        assert (state["status"], state["current_checkpoint_kind"], state["query"]) == (
            "waiting",
            "plan",
            "quokka",
        )

        # The plan, edited: papers from 2015 on.
        progress = Progress()
        screening = await _call(
            client,
            "decide",
            {"session_id": session_id, "action": "edit", "data": {"year_from": 2015}, "note": "recent"},
            progress,
        )
        assert screening["checkpoint"]["kind"] == "screening", screening
        assert _titles(screening["checkpoint"]) == {title for title, *_ in PAPERS}
        assert progress.seen == sorted(set(progress.seen))

        # Rejected, refining the query: the papers about quokkas as marsupials.
        refined = await _call(
            client,
            "decide",
            {"session_id": session_id, "action": "reject", "data": {"terms": ["quokka marsupial"]}},
        )
        assert refined["checkpoint"]["kind"] == "screening", refined
        assert _titles(refined["checkpoint"]) == {title for title, *_ in PAPERS[:3]}
        assert refined["iteration"] == screening["iteration"] + 1

        # Edited: two of the three kept.
        by_title = {paper["title"]: paper["id"] for paper in refined["checkpoint"]["candidates"]}
        kept = [by_title[PAPERS[0][0]], by_title[PAPERS[2][0]]]
        final = await _call(
            client, "decide", {"session_id": session_id, "action": "edit", "data": {"keep": kept}}
        )
        assert final["checkpoint"]["kind"] == "final", final
        assert _titles(final["checkpoint"]) == {PAPERS[0][0], PAPERS[2][0]}

        done = await _call(client, "decide", {"session_id": session_id, "action": "approve"})
        assert done["result"]["paper_count"] == 2, done
        state = await _call(client, "get_session", {"session_id": session_id})
        assert (state["is_complete"], state["has_pending_checkpoint"], state["error"]) == (True, False, None)

        exports = {}
        for fmt in ("json", "bibtex", "markdown"):
            exported = await _call(client, "export_results", {"session_id": session_id, "format": fmt})
            assert (exported["session_id"], exported["format"]) == (session_id, fmt)
            exports[fmt] = exported["content"]

    # Whatever its layout, the JSON export parses and holds the two papers and no other.
    as_json = json.dumps(json.loads(exports["json"]), ensure_ascii=False)
    assert "Rottnest" in as_json
    assert "selfies" in as_json
    assert "population genetics" not in as_json
    assert "tourism" not in as_json
    library = bibtexparser.parse_string(exports["bibtex"])
    assert not library.failed_blocks
    keys = [entry.key for entry in library.entries]
    assert len(keys) == len(set(keys)) == 2
    titles = " ".join(str(entry.fields_dict["title"].value) for entry in library.entries)
    assert "Rottnest" in titles
    assert "selfies" in titles
    assert "Rottnest" in exports["markdown"]
    assert "selfies" in exports["markdown"]


async def test_a_cancelled_search_stays_cancelled(server, jobs_worker, research_on):
    async with sdk_client(server, Person("alice")) as (client, _):
        started = await _call(client, "search_papers", {"query": "quokka"})
        session_id = started["session_id"]
        cancelled = await _call(client, "cancel_session", {"session_id": session_id})
        assert cancelled["status"] == "cancelled"
        refused = await client.call_tool("decide", {"session_id": session_id, "action": "approve"})
        assert refused.is_error
        assert refused.structured_content["error"]["reason"] == "cancelled"
        state = await _call(client, "get_session", {"session_id": session_id})
        assert state["status"] == "cancelled"
    job = await Job.objects.aget(pk=session_id)
    # Where it was started, for the record: the MCP session and the OAuth client.
    assert job.origin.startswith("mcp-session:")
    assert job.client_id


async def test_another_persons_session_reads_like_an_unknown_one(server, jobs_worker, committed, research_on):
    async with minted_sdk_client(committed, server, Person("alice")) as (client, _):
        started = await _call(client, "search_papers", {"query": "quokka"})
    session_id = started["session_id"]
    for person in (Person("bob"), Person("carol")):
        async with minted_sdk_client(committed, server, person) as (client, _):
            result = await client.call_tool("get_session", {"session_id": session_id})
        assert result.is_error
        error = result.structured_content["error"]
        assert (error["code"], error["reason"]) == (-32002, "unknown_session")
        assert session_id in error["message"]
        text = result.content[-1]
        assert isinstance(text, TextContent)
        assert "-32002" in text.text


async def test_a_viewer_may_follow_but_not_start_a_search(server, committed, research_on):
    async with minted_sdk_client(committed, server, Person("bob")) as (client, _):
        listed = {tool.name for tool in (await client.list_tools()).tools}
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("search_papers", {"query": "quokka"})
    assert refusal.value.code == -32001
    assert {"get_session", "export_results"} <= listed
    assert not {"search_papers", "decide", "cancel_session"} & listed


async def _raw_call(raw: RawMcp, server: Any, session_id: str, name: str, arguments: Any) -> tuple[Any, str]:
    """A tools/call whose body is encoded here (so it can carry what no UTF-8 text can), stamped
    with a request id of its own; its HTTP response and that id."""
    request_id = "e2e-" + secrets.token_hex(8)
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = await raw.http.post(
        server.mcp_url,
        content=json.dumps(body).encode(),
        headers={**raw.headers(session_id), "x-request-id": request_id},
    )
    return response, request_id


async def test_hostile_arguments_get_clean_errors_and_audit_rows(server, jobs_worker, committed, research_on):
    raw = RawMcp(minted_token(committed, server, Person("alice")))
    try:
        session_id = await raw.initialize(server.mcp_url)
        deep: dict[str, Any] = {"leaf": 1}
        for _ in range(40):
            deep = {"terms": deep}
        cases = [
            # (tool, arguments, how it is refused: a tool result or a JSON-RPC error code)
            ("search_papers", {"query": "quo\x00kka"}, "isError"),
            ("search_papers", {"query": "quo\ud800kka"}, -32602),
            ("search_papers", {"query": "q" * 200_000}, -32602),
            ("search_papers", {"query": "quokka", "max_results": 10**30}, -32602),
            ("decide", {"session_id": "\x00", "action": "approve"}, "isError"),
            ("decide", {"session_id": "x" * 100_000, "action": "approve"}, -32602),
            ("get_session", {"session_id": "\udc00"}, -32602),
            (
                "decide",
                {"session_id": "00000000-0000-0000-0000-000000000000", "action": "edit", "data": deep},
                "isError",
            ),
            (
                "export_results",
                {"session_id": "00000000-0000-0000-0000-000000000000", "format": "pdf"},
                -32602,
            ),
        ]
        for name, arguments, expected in cases:
            response, request_id = await _raw_call(raw, server, session_id, name, arguments)
            assert response.status_code == 200, (name, response.status_code, response.text[:300])
            (message,) = [m for m in sse_messages(response) if m.get("id") == 7]
            if expected == "isError":
                assert message["result"]["isError"] is True, message
                error = message["result"]["structuredContent"]["error"]
                assert error["reason"] in {"invalid_data", "unknown_session"}, error
            else:
                assert message["error"]["code"] == expected, message
            rows = [event async for event in AuditEvent.objects.filter(request_id=request_id, target=name)]
            assert rows, (name, request_id)
            assert all(row.outcome != AuditOutcome.OK for row in rows)

        # Too deep for any parser: refused before any tool runs, never a 500.
        for _ in range(80):
            deep = {"terms": deep}
        response, _ = await _raw_call(
            raw, server, session_id, "decide", {"session_id": "x", "action": "edit", "data": deep}
        )
        assert response.status_code < 500
        (message,) = [m for m in sse_messages(response) if "error" in m]
        assert message["error"]["code"] == -32700
    finally:
        await raw.aclose()
