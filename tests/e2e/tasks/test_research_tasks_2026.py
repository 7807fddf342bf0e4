"""The literature search as a task of the 2026-07-28 tasks extension, end to end: raw JSON-RPC over
HTTP to Daphne, the job's steps run by the jobs worker, on acme's own library. The task is the
job: each checkpoint is the task's input request, each tasks/update a decision."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import access_token
from tests.e2e.research.test_research_tools import PAPERS, research_on  # noqa: F401 (a fixture)
from tests.e2e.tasks.test_task_extension_http import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
async def clients(server, jobs_worker, research_on):  # noqa: F811
    import httpx

    # One after the other: two sign-ins of alice's at once would race over her consent.
    tokens = [
        await access_token(server, Person("alice")),
        await access_token(server, Person("alice"), scope="mcp:read"),
        await access_token(server, Person("bob"), scope="mcp:read"),
        await access_token(server, Person("carol")),
    ]
    async with httpx.AsyncClient(timeout=60) as http:
        yield {
            name: Client(http, server.mcp_url, token)
            for name, token in zip(("alice", "alice_viewer", "bob", "carol"), tokens, strict=True)
        }


async def _next(
    client: Client, task_id: str, *, after: str | None = None
) -> tuple[dict[str, Any], str | None]:
    """The task once it stops working and waits at a request other than ``after`` (or finishes)."""
    for _ in range(600):
        task = await client.result("tasks/get", {"taskId": task_id})
        if task["status"] in {"completed", "failed", "cancelled"}:
            return task, None
        if task["status"] == "input_required":
            [key] = task["inputRequests"]
            if key != after:
                return task, key
        await asyncio.sleep(0.1)
    raise AssertionError(f"task {task_id} stayed {task['status']}")


def _accept(key: str | None, **content: Any) -> dict[str, Any]:
    assert key is not None
    return {key: {"action": "accept", "content": content}}


async def test_a_search_task_runs_to_its_result_through_its_forms(clients):
    alice = clients["alice"]
    created = await alice.result("tools/call", {"name": "search_papers", "arguments": {"query": "quokka"}})
    assert created["resultType"] == "task"
    task_id = created["taskId"]

    task, key = await _next(alice, task_id)
    assert (task["status"], key) == ("input_required", "plan-0"), task
    form = task["inputRequests"][key]
    assert form["method"] == "elicitation/create"
    assert form["params"]["mode"] == "form"
    assert "quokka" in form["params"]["message"]
    schema = form["params"]["requestedSchema"]
    assert schema["properties"]["action"]["enum"] == ["approve", "edit", "reject"]
    assert "year_from" in schema["properties"]

    # Strangers see no such task; alice's own read-only token may look but not decide.
    for stranger in (clients["bob"], clients["carol"]):
        assert await stranger.code("tasks/get", {"taskId": task_id}) == -32602
        update = {"taskId": task_id, "inputResponses": _accept(key, action="approve")}
        assert await stranger.code("tasks/update", update) == -32602
        assert await stranger.code("tasks/cancel", {"taskId": task_id}) == -32602
    viewer = clients["alice_viewer"]
    assert (await viewer.result("tasks/get", {"taskId": task_id}))["status"] == "input_required"
    approve = {"taskId": task_id, "inputResponses": _accept(key, action="approve")}
    assert await viewer.code("tasks/update", approve) == -32001
    # An answer the kind refuses is -32602 and loses nothing.
    bad = {"taskId": task_id, "inputResponses": _accept(key, action="edit", year_from="soon")}
    assert await alice.code("tasks/update", bad) == -32602
    assert (await _next(alice, task_id))[1] == "plan-0"

    edit = _accept(key, action="edit", year_from=2015, note="recent")
    assert (await alice.result("tasks/update", {"taskId": task_id, "inputResponses": edit}))[
        "resultType"
    ] == "complete"
    task, key = await _next(alice, task_id, after="plan-0")
    assert key == "screening-1", task
    keep = task["inputRequests"][key]["params"]["requestedSchema"]["properties"]["keep"]
    assert len(keep["items"]["anyOf"]) == len(PAPERS)

    await alice.result("tasks/update", {"taskId": task_id, "inputResponses": _accept(key, action="approve")})
    task, key = await _next(alice, task_id, after="screening-1")
    assert key == "final-2", task
    await alice.result("tasks/update", {"taskId": task_id, "inputResponses": _accept(key, action="approve")})
    task, key = await _next(alice, task_id, after="final-2")
    assert task["status"] == "completed", task
    structured = task["result"]["structuredContent"]
    assert structured["session_id"] == task_id
    assert structured["result"]["paper_count"] == len(PAPERS)

    # The task is the job: the research tools follow it by the same id.
    session = await alice.result("tools/call", {"name": "get_session", "arguments": {"session_id": task_id}})
    assert session["structuredContent"]["status"] == "complete"


async def test_cancelling_the_task_cancels_the_search(clients):
    alice = clients["alice"]
    created = await alice.result("tools/call", {"name": "search_papers", "arguments": {"query": "quokka"}})
    task_id = created["taskId"]
    await _next(alice, task_id)
    assert await clients["alice_viewer"].code("tasks/cancel", {"taskId": task_id}) == -32001
    assert (await alice.result("tasks/get", {"taskId": task_id}))["status"] == "input_required"
    await alice.result("tasks/cancel", {"taskId": task_id})
    assert (await alice.result("tasks/get", {"taskId": task_id}))["status"] == "cancelled"
    session = await alice.result("tools/call", {"name": "get_session", "arguments": {"session_id": task_id}})
    assert session["structuredContent"]["status"] == "cancelled"


async def test_without_the_extension_search_papers_answers_as_before(clients, server):
    token = clients["alice"].token
    plain = Client(clients["alice"].http, server.mcp_url, token, declares=False)
    answer = await plain.result("tools/call", {"name": "search_papers", "arguments": {"query": "quokka"}})
    assert answer.get("resultType", "complete") == "complete"
    assert answer["structuredContent"]["checkpoint"]["kind"] == "plan"
