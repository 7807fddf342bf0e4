"""The tasks extension of 2026-07-28 end to end: raw JSON-RPC over HTTP to Daphne, the tasks run
by the jobs worker. Whose task is whose, input through tasks/update, cancellation, hostile ids."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import access_token
from tests.e2e.raw_mcp import MCP_HEADERS, sse_messages

pytestmark = pytest.mark.django_db

TASKS = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"


class Client:
    """A 2026-07-28 client over raw HTTP that declares the tasks extension (or not)."""

    def __init__(self, http: Any, url: str, token: str, *, declares: bool = True) -> None:
        self.http = http
        self.url = url
        self.token = token
        self.declares = declares
        self.next_id = 0

    async def send(self, method: str, params: dict[str, Any], *, name: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        extensions: dict[str, Any] = {TASKS: {}} if self.declares else {}
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": method,
            "params": {
                **params,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {
                        "elicitation": {},
                        "extensions": extensions,
                    },
                },
            },
        }
        headers = {
            **MCP_HEADERS,
            "authorization": f"Bearer {self.token}",
            "mcp-protocol-version": VERSION,
            "mcp-method": method,
        }
        label = name if name is not None else params.get("name", params.get("taskId"))
        if isinstance(label, str):
            headers["mcp-name"] = label
        response = await self.http.post(self.url, json=body, headers=headers)
        [message] = [m for m in sse_messages(response) if m.get("id") == self.next_id]
        return message

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = await self.send(method, params)
        assert "result" in message, message
        return message["result"]

    async def code(self, method: str, params: dict[str, Any], **kw: Any) -> int:
        message = await self.send(method, params, **kw)
        assert "error" in message, message
        return int(message["error"]["code"])

    async def settled(self, task_id: str, *, until: frozenset[str] | None = None) -> dict[str, Any]:
        wanted = until or frozenset({"completed", "failed", "cancelled"})
        for _ in range(600):
            task = await self.result("tasks/get", {"taskId": task_id})
            if task["status"] in wanted:
                return task
            await asyncio.sleep(0.1)
        raise AssertionError(f"task {task_id} stayed {task['status']}")


@pytest.fixture
async def clients(server, jobs_worker, tenant_toolset):
    import httpx

    tenant_toolset("acme", "conformance", enabled=True)
    tenant_toolset("globex", "conformance", enabled=True)
    tokens = await asyncio.gather(
        access_token(server, Person("alice")),
        access_token(server, Person("bob"), scope="mcp:read"),
        access_token(server, Person("carol")),
    )
    async with httpx.AsyncClient(timeout=30) as http:
        yield {
            name: Client(http, server.mcp_url, token)
            for name, token in zip(("alice", "bob", "carol"), tokens, strict=True)
        }


async def test_a_task_is_its_persons_alone(clients):
    alice, bob, carol = clients["alice"], clients["bob"], clients["carol"]
    created = await alice.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    for stranger in (bob, carol):  # another person of the tenant (a viewer), another tenant's admin
        assert await stranger.code("tasks/get", {"taskId": task_id}) == -32602
        assert await stranger.code("tasks/cancel", {"taskId": task_id}) == -32602
        assert await stranger.code("tasks/update", {"taskId": task_id, "inputResponses": {}}) == -32602
    assert (await alice.result("tasks/get", {"taskId": task_id}))["status"] == "working"
    assert (await alice.result("tasks/cancel", {"taskId": task_id}))["resultType"] == "complete"
    assert (await alice.settled(task_id))["status"] == "cancelled"


async def test_a_viewer_follows_their_own_task_to_its_result(clients):
    bob = clients["bob"]
    created = await bob.result(
        "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "v"}}
    )
    task = await bob.settled(created["taskId"])
    assert task["status"] == "completed"
    assert "Computed v" in task["result"]["content"][0]["text"]


async def test_input_through_tasks_update_resumes_the_task(clients):
    alice = clients["alice"]
    created = await alice.result("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}})
    waiting = await alice.settled(
        created["taskId"], until=frozenset({"input_required", "completed", "failed"})
    )
    assert waiting["status"] == "input_required"
    [key] = waiting["inputRequests"]
    assert waiting["inputRequests"][key]["method"] == "elicitation/create"
    responses = {key: {"action": "accept", "content": {"confirm": True}}}
    await alice.result("tasks/update", {"taskId": created["taskId"], "inputResponses": responses})
    done = await alice.settled(created["taskId"])
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "Deleted a.txt."


async def test_without_the_extension_a_required_tool_is_refused_and_an_optional_one_runs(clients):
    plain = Client(clients["alice"].http, clients["alice"].url, clients["alice"].token, declares=False)
    message = await plain.send("tools/call", {"name": "failing_job", "arguments": {}})
    assert message["error"]["code"] == -32021
    assert TASKS in message["error"]["data"]["requiredCapabilities"]["extensions"]
    result = await plain.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
    assert result["resultType"] == "complete"
    assert await plain.code("tasks/get", {"taskId": "whatever"}) == -32021


@pytest.mark.parametrize(
    "task_id",
    ["a\u0000b", "x" * 5000, "../../etc/passwd", "00000000-0000-0000-0000-000000000000"],
    ids=["nul", "long", "path", "uuid"],
)
async def test_hostile_task_ids_are_unknown_tasks(clients, task_id):
    alice = clients["alice"]
    # The header cannot carry a NUL: that one is refused for the header first.
    expected = -32020 if "\u0000" in task_id else -32602
    assert await alice.code("tasks/get", {"taskId": task_id}, name=task_id.replace("\u0000", "")) == expected


async def test_arguments_a_task_cannot_store_are_refused(clients):
    alice = clients["alice"]
    message = await alice.send(
        "tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "a\u0000"}}
    )
    assert message["error"]["code"] == -32602
