"""The literature search over stdio, as a desktop client that starts ``manage.py mcp_stdio`` runs
it: the SDK's stdio client, the same tools and job, the steps taken by the ``manage.py jobs_worker``
beside the HTTP server, and the decisions recorded as made over MCP."""

from __future__ import annotations

import bibtexparser
import pytest

from jobs.models import Job
from tests.e2e.conftest import _in_own_thread
from tests.e2e.mcp.test_mcp_stdio_process import stdio_client
from tests.e2e.research.test_research_tools import PAPERS, Progress, _call, research_on  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


@pytest.mark.usefixtures("jobs_worker", "research_on")
async def test_a_search_runs_to_completion_over_stdio_and_exports_bibtex(server, django_db_blocker):
    async with stdio_client(server, "alice") as client:
        progress = Progress()
        started = await _call(client, "search_papers", {"query": "quokka"}, progress)
        session_id = started["session_id"]
        assert started["checkpoint"]["kind"] == "plan", started
        assert progress.seen == sorted(set(progress.seen))

        screening = await _call(client, "decide", {"session_id": session_id, "action": "approve"})
        assert screening["checkpoint"]["kind"] == "screening", screening
        assert {paper["title"] for paper in screening["checkpoint"]["candidates"]} == {t for t, *_ in PAPERS}

        final = await _call(client, "decide", {"session_id": session_id, "action": "approve"})
        assert final["checkpoint"]["kind"] == "final", final
        done = await _call(
            client, "decide", {"session_id": session_id, "action": "approve", "note": "from my desktop"}
        )
        assert done["result"]["paper_count"] == len(PAPERS)

        state = await _call(client, "get_session", {"session_id": session_id})
        assert state["is_complete"] is True
        exported = await _call(client, "export_results", {"session_id": session_id, "format": "bibtex"})

    library = bibtexparser.parse_string(exported["content"])
    assert not library.failed_blocks
    assert len(library.entries) == len(PAPERS)

    def history() -> tuple[str, list[tuple[str, str, str]]]:
        job = Job.objects.get(pk=session_id)
        rows = [(d.checkpoint_kind, d.action, d.channel) for d in job.decisions.order_by("created", "id")]
        return job.client_id, rows

    with django_db_blocker.unblock():
        client_id, decisions = _in_own_thread(history)
    assert client_id == "stdio"
    # The stdio channel, as docs/research-pages.md says (it said mcp before).
    assert decisions == [
        ("plan", "approve", "stdio"),
        ("screening", "approve", "stdio"),
        ("final", "approve", "stdio"),
    ]
