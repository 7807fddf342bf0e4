"""Task status notifications (the tasks extension on 2026-07-28) end to end: a ``subscriptions/listen``
stream naming tasks in ``notifications.taskIds`` hears each change the jobs worker (another
process) makes to them, as ``tasks/get`` shows it; never another person's task; hostile filters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.e2e.harness import Person
from tests.e2e.oauth_driver import access_token
from tests.e2e.raw_mcp import MCP_HEADERS
from tests.e2e.tasks.test_task_extension_http import TASKS, VERSION, Client

pytestmark = pytest.mark.django_db

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
STATUS = "notifications/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


@pytest.fixture
async def clients(server, jobs_worker, tenant_toolset):
    """Alice (admin) and bob (viewer) of one tenant, carol of another, all with tasks to run."""
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


async def _slow_task(client: Client) -> str:
    created = await client.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}})
    task_id: str = created["taskId"]
    return task_id


def _listen_body(client: Client, notifications: dict[str, Any]) -> dict[str, Any]:
    client.next_id += 1
    extensions: dict[str, Any] = {TASKS: {}} if client.declares else {}
    return {
        "jsonrpc": "2.0",
        "id": client.next_id,
        "method": "subscriptions/listen",
        "params": {
            "notifications": notifications,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
            },
        },
    }


def _headers(client: Client) -> dict[str, str]:
    return {
        **MCP_HEADERS,
        "authorization": f"Bearer {client.token}",
        "mcp-protocol-version": VERSION,
        "mcp-method": "subscriptions/listen",
    }


class Stream:
    def __init__(self, lines: AsyncIterator[str], subscription_id: int) -> None:
        self.lines = lines
        self.subscription_id = subscription_id

    async def next(self) -> dict[str, Any]:
        async for line in self.lines:
            if line.startswith("data:"):
                frame: dict[str, Any] = json.loads(line[5:])
                return frame
        raise AssertionError("the stream ended")

    async def acknowledged(self) -> dict[str, Any]:
        first = await self.next()
        assert first["method"] == ACKNOWLEDGED, first
        assert first["params"]["_meta"][SUBSCRIPTION_ID] == self.subscription_id
        notifications: dict[str, Any] = first["params"]["notifications"]
        return notifications

    async def until_finished(self, task_id: str) -> list[dict[str, Any]]:
        """The status frames of ``task_id`` up to its terminal one (any other frame fails)."""
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1]["status"] not in TERMINAL:
            frame = await self.next()
            assert frame["method"] == STATUS, frame
            assert frame["params"]["_meta"][SUBSCRIPTION_ID] == self.subscription_id
            assert frame["params"]["taskId"] == task_id, frame
            frames.append(frame["params"])
        return frames


@asynccontextmanager
async def listening(client: Client, notifications: dict[str, Any]) -> AsyncIterator[Stream]:
    body = _listen_body(client, notifications)
    async with client.http.stream("POST", client.url, json=body, headers=_headers(client)) as response:
        assert response.status_code == 200, await response.aread()
        yield Stream(response.aiter_lines(), body["id"])


async def _refused(client: Client, notifications: dict[str, Any]) -> dict[str, Any]:
    body = _listen_body(client, notifications)
    response = await client.http.post(client.url, json=body, headers=_headers(client))
    text = response.text
    frames = (
        [response.json()]
        if response.headers.get("content-type", "").startswith("application/json")
        else [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    )
    [answer] = [frame for frame in frames if frame.get("id") == body["id"]]
    assert "error" in answer, answer
    error: dict[str, Any] = answer["error"]
    error["httpStatus"] = response.status_code
    return error


def _as_tasks_get(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if key not in {"_meta", "resultType"}}


async def test_a_stream_hears_its_task_resume_and_complete_as_tasks_get_shows_it(clients):
    alice = clients["alice"]
    created = await alice.result("tools/call", {"name": "confirm_delete", "arguments": {"filename": "n.txt"}})
    task_id = created["taskId"]
    waiting = await alice.settled(task_id, until=frozenset({"input_required", *TERMINAL}))
    assert waiting["status"] == "input_required"
    [key] = waiting["inputRequests"]
    async with listening(alice, {"taskIds": [task_id]}) as stream:
        assert (await stream.acknowledged())["taskIds"] == [task_id]
        responses = {key: {"action": "accept", "content": {"confirm": True}}}
        await alice.result("tasks/update", {"taskId": task_id, "inputResponses": responses})
        frames = await stream.until_finished(task_id)
    # Each frame is the task as it was when read: working, perhaps, then completed.
    assert {frame["status"] for frame in frames[:-1]} <= {"working"}
    last = frames[-1]
    assert last["status"] == "completed"
    assert last["result"]["content"][0]["text"] == "Deleted n.txt."
    assert "ttlMs" in last
    assert "resultType" not in last
    assert _as_tasks_get(last) == _as_tasks_get(await alice.result("tasks/get", {"taskId": task_id}))


async def test_a_cancelled_task_is_heard_cancelled_and_a_strangers_stream_hears_nothing(clients):
    alice, bob = clients["alice"], clients["bob"]
    theirs = (await alice.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}))[
        "taskId"
    ]
    own = await _slow_task(bob)
    async with (
        listening(alice, {"taskIds": [theirs]}) as alices,
        listening(bob, {"taskIds": [theirs, own]}) as bobs,
    ):
        await alices.acknowledged()
        # Acknowledging only one's own tasks would tell who owns which: every well-formed id is echoed.
        assert (await bobs.acknowledged())["taskIds"] == [theirs, own]
        await alice.result("tasks/cancel", {"taskId": theirs})
        frames = await alices.until_finished(theirs)
        assert frames[-1]["status"] == "cancelled"
        assert (await alice.settled(theirs))["status"] == "cancelled"
        # Alice's cancellation was announced first: were bob told of it, it would come before his own.
        await bob.result("tasks/cancel", {"taskId": own})
        bobs_frames = await bobs.until_finished(own)
        assert bobs_frames[-1]["status"] == "cancelled"


async def test_a_stream_of_another_tenant_hears_nothing_of_the_task(clients):
    alice, carol = clients["alice"], clients["carol"]
    theirs = (await alice.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 60}}))[
        "taskId"
    ]
    own = await _slow_task(carol)
    async with listening(carol, {"taskIds": [theirs, own]}) as stream:
        await stream.acknowledged()
        await alice.result("tasks/cancel", {"taskId": theirs})
        await alice.settled(theirs)
        await carol.result("tasks/cancel", {"taskId": own})
        frames = await stream.until_finished(own)
        assert frames[-1]["status"] == "cancelled"


async def test_task_ids_without_the_extension_declared_are_refused(clients):
    alice = clients["alice"]
    plain = Client(alice.http, alice.url, alice.token, declares=False)
    error = await _refused(plain, {"taskIds": ["00000000-0000-0000-0000-000000000000"]})
    assert error["code"] == -32021
    assert error["httpStatus"] == 400  # refused as a whole, before any stream
    assert TASKS in error["data"]["requiredCapabilities"]["extensions"]
    # Without taskIds the same client listens as before.
    async with listening(plain, {"toolsListChanged": True}) as stream:
        assert "taskIds" not in await stream.acknowledged()


@pytest.mark.parametrize(
    "task_ids",
    ["not-a-list", {"a": 1}, 7, ["x"] * 101, [str(i) for i in range(100_000)]],
    ids=["string", "object", "number", "101", "huge"],
)
async def test_hostile_task_id_filters_are_invalid_params(clients, task_ids):
    assert (await _refused(clients["alice"], {"taskIds": task_ids}))["code"] == -32602


async def test_entries_that_cannot_be_task_ids_are_left_out_of_the_acknowledgement(clients):
    alice = clients["alice"]
    own = await _slow_task(alice)
    hostile = [1, None, True, {"id": own}, [own], "a\u0000b", "x" * 5000, "", "\u0007bell", own, own]
    async with listening(alice, {"taskIds": hostile, "toolsListChanged": True}) as stream:
        acknowledged = await stream.acknowledged()
        assert acknowledged["taskIds"] == [own]
        assert acknowledged["toolsListChanged"] is True
        await alice.result("tasks/cancel", {"taskId": own})
        assert (await stream.until_finished(own))[-1]["status"] == "cancelled"
