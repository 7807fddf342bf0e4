"""MCP tasks (protocol 2025-11-25) over real HTTP: a task-augmented ``search_papers`` is the
literature search job, followed with ``tasks/get``, ``tasks/result`` and ``tasks/cancel``.

The SDK client sends neither task-augmented calls nor ``tasks/*`` (``docs/mcp-tasks.md``), so these
tests speak raw JSON-RPC. The job's steps run in a ``manage.py jobs_worker`` beside the server, on
the tenant's own library."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    TaskMetadata,
)
from pydantic import ValidationError

from accounts.models import Membership, Role
from core.models import AuditAction, AuditEvent
from jobs.checkpoints import checkpoint_pending
from jobs.models import Job, JobState
from research.models import LibraryPaper
from research.services import search_decide, search_start
from tests.e2e.harness import DaphneServer, Person, sdk_client
from tests.e2e.raw_mcp import MCP_HEADERS, RawMcp, initialize_body, sse_messages
from tests.support.factories import AccessTokenFactory, MembershipFactory

pytestmark = pytest.mark.django_db

WAIT_SECONDS = 60.0


class Caller:
    """One person's raw MCP session."""

    def __init__(self, server: DaphneServer, raw: RawMcp, membership: Any) -> None:
        self.server = server
        self.raw = raw
        self.membership = membership
        self.session_id = ""

    async def start(self, *, version: str = "2025-11-25") -> dict[str, Any]:
        body = initialize_body()
        body["params"]["protocolVersion"] = version
        response = await self.raw.http.post(
            self.server.mcp_url,
            json=body,
            headers={**MCP_HEADERS, "authorization": f"Bearer {self.raw.token}"},
        )
        assert response.status_code == 200, response.text
        self.session_id = response.headers["mcp-session-id"]
        self.version = version
        await self.raw.http.post(
            self.server.mcp_url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=self._headers(),
        )
        return dict(response.json()["result"])

    def _headers(self) -> dict[str, str]:
        return self.raw.headers(self.session_id, **{"mcp-protocol-version": self.version})

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.raw.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.raw.next_id, "method": method, "params": params}
        # ASCII JSON, so a lone surrogate travels as the \\u escape a hostile client would send.
        response = await self.raw.http.post(
            self.server.mcp_url, content=json.dumps(body).encode(), headers=self._headers(), timeout=60
        )
        assert response.status_code == 200, response.text
        (message,) = [m for m in sse_messages(response) if "id" in m]
        return dict(message)

    async def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = await self.send(method, params)
        assert "result" in message, message
        return dict(message["result"])

    async def error(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = await self.send(method, params)
        assert "error" in message, message
        return dict(message["error"])

    async def start_task(self, query: str = "attention") -> str:
        created = await self.result(
            "tools/call", {"name": "search_papers", "arguments": {"query": query}, "task": {"ttl": 60000}}
        )
        task = created["task"]
        assert task["status"] == "working"
        assert task["pollInterval"] > 0
        assert "ttl" in task
        return str(task["taskId"])

    async def wait_status(self, task_id: str, wanted: set[str], *, kind: str | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            task = await self.result("tasks/get", {"taskId": task_id})
            done = task["status"] in wanted
            if done and kind is not None and task["status"] == "input_required":
                done = f"the {kind} checkpoint" in task.get("statusMessage", "")
            if done:
                return task
            assert task["status"] not in {"failed", "cancelled"} - wanted, task
            assert time.monotonic() < deadline, task
            await asyncio.sleep(0.2)


@pytest.fixture
def library(committed):
    def make(tenant) -> None:
        committed(
            LibraryPaper.objects.create,
            tenant=tenant,
            title="Attention is all you need",
            title_key="attention is all you need",
            authors=["Ashish Vaswani"],
            year=2017,
            doi="10.5555/attention",
            abstract="transformers",
        )

    return make


@pytest.fixture
async def caller_of(server, jobs_worker, committed, tenant_toolset):
    clients: list[RawMcp] = []

    def make(membership=None, *, scope: str = "mcp:read mcp:write") -> Caller:
        membership = membership or committed(MembershipFactory, role=Role.ADMIN)
        tenant_toolset(membership.tenant.slug, "research", enabled=True)
        token = committed(AccessTokenFactory, membership=membership, resource=[server.mcp_url], scope=scope)
        raw = RawMcp(token.token)
        clients.append(raw)
        return Caller(server, raw, membership)

    yield make
    for raw in clients:
        await raw.aclose()


def _decide_shown(**decision: Any) -> None:
    """As the research page decides: naming the checkpoint it showed, the one pending now."""
    pending = checkpoint_pending(Job.objects.get(pk=decision["session_id"]))
    search_decide(checkpoint=pending, **decision)


def _decide(committed, caller: Caller, task_id: str, action: str = "approve") -> None:
    membership = caller.membership
    committed(
        _decide_shown,
        tenant_id=membership.tenant_id,
        user_id=membership.user_id,
        session_id=task_id,
        action=action,
        channel="page",
    )


def _job(committed, task_id: str) -> Job:
    return committed(Job.objects.get, pk=task_id)


async def test_the_server_offers_tasks_on_2025_11_25_and_marks_the_tool(caller_of):
    caller = caller_of()
    initialized = await caller.start()
    assert initialized["capabilities"]["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {t["name"]: t for t in (await caller.result("tools/list", {}))["tools"]}
    assert tools["search_papers"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["whoami"]


async def test_a_task_follows_the_job_through_its_checkpoints_to_its_result(caller_of, library, committed):
    caller = caller_of()
    library(caller.membership.tenant)
    await caller.start()
    task_id = await caller.start_task()
    assert _job(committed, task_id).state in {JobState.RUNNING, JobState.WAITING}

    task = await caller.wait_status(task_id, {"input_required"}, kind="plan")
    assert task["taskId"] == task_id
    assert task["createdAt"]
    assert task["lastUpdatedAt"]
    pending = await caller.result("tasks/result", {"taskId": task_id})
    assert pending["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert pending["structuredContent"]["checkpoint"]["kind"] == "plan"
    assert pending["structuredContent"]["session_id"] == task_id
    assert not pending.get("isError")

    _decide(committed, caller, task_id)
    task = await caller.result("tasks/get", {"taskId": task_id})
    assert task["status"] in {"working", "input_required"}
    await caller.wait_status(task_id, {"input_required"}, kind="screening")
    screening = await caller.result("tasks/result", {"taskId": task_id})
    assert [c["title"] for c in screening["structuredContent"]["checkpoint"]["candidates"]] == [
        "Attention is all you need"
    ]
    _decide(committed, caller, task_id)
    await caller.wait_status(task_id, {"input_required"}, kind="final")
    _decide(committed, caller, task_id)

    task = await caller.wait_status(task_id, {"completed"})
    assert task["status"] == "completed"
    final = await caller.result("tasks/result", {"taskId": task_id})
    assert final["structuredContent"]["result"]["paper_count"] == 1
    # A finished task cannot be cancelled: the protocol's -32602.
    refused = await caller.error("tasks/cancel", {"taskId": task_id})
    assert refused["code"] == -32602
    assert _job(committed, task_id).state == JobState.COMPLETE


async def test_a_cancelled_task_is_a_cancelled_job(caller_of, library, committed):
    caller = caller_of()
    library(caller.membership.tenant)
    await caller.start()
    task_id = await caller.start_task()
    await caller.wait_status(task_id, {"input_required"})

    cancelled = await caller.result("tasks/cancel", {"taskId": task_id})
    assert cancelled["status"] == "cancelled"
    assert (await caller.result("tasks/get", {"taskId": task_id}))["status"] == "cancelled"
    assert _job(committed, task_id).state == JobState.CANCELLED
    result = await caller.result("tasks/result", {"taskId": task_id})
    assert result["isError"] is True
    assert result["structuredContent"]["status"] == "cancelled"


async def test_another_persons_or_tenants_task_is_not_found(caller_of, library, committed):
    owner = caller_of()
    library(owner.membership.tenant)
    await owner.start()
    task_id = await owner.start_task()

    colleague = caller_of(committed(MembershipFactory, tenant=owner.membership.tenant, role=Role.ADMIN))
    stranger = caller_of()
    for other in (colleague, stranger):
        await other.start()
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            assert (await other.error(method, {"taskId": task_id}))["code"] == -32002, method
    assert _job(committed, task_id).state != JobState.CANCELLED
    await owner.result("tasks/cancel", {"taskId": task_id})


@pytest.mark.parametrize(
    ("task_id", "codes"),
    [
        ("", {-32002}),
        ("not-a-task", {-32002}),
        ("\u0000", {-32002}),
        ("00000000-0000-0000-0000-000000000000\u0000", {-32002}),
        ("a" * 200_000, {-32002}),
        ("\ud800", {-32002, -32602}),
        (12345, {-32602}),
        (None, {-32602}),
        ({"id": "x"}, {-32602}),
    ],
    ids=["empty", "words", "nul", "uuid-nul", "huge", "surrogate", "number", "null", "object"],
)
async def test_hostile_task_ids_get_the_endpoints_own_errors(caller_of, task_id, codes):
    caller = caller_of()
    await caller.start()
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert (await caller.error(method, {"taskId": task_id}))["code"] in codes, method
    assert (await caller.error("tasks/get", {}))["code"] == -32602


async def test_a_malformed_task_field_is_invalid_params(caller_of):
    caller = caller_of()
    await caller.start()
    for task in ("soon", 5, {"ttl": "long"}):
        error = await caller.error(
            "tools/call", {"name": "search_papers", "arguments": {"query": "x"}, "task": task}
        )
        assert error["code"] == -32602, task


async def test_a_call_without_task_is_a_plain_tool_call(caller_of, library):
    caller = caller_of()
    library(caller.membership.tenant)
    await caller.start()
    result = await caller.result("tools/call", {"name": "search_papers", "arguments": {"query": "attention"}})
    assert "task" not in result
    assert result["structuredContent"]["session_id"]


async def test_a_tool_without_task_support_refuses_task_execution(caller_of):
    caller = caller_of()
    await caller.start()
    error = await caller.error("tools/call", {"name": "whoami", "arguments": {}, "task": {}})
    assert error["code"] == -32601


async def test_an_older_protocol_version_has_no_tasks(caller_of, library, committed):
    caller = caller_of()
    library(caller.membership.tenant)
    initialized = await caller.start(version="2025-06-18")
    assert "tasks" not in initialized["capabilities"]
    tools = {t["name"]: t for t in (await caller.result("tools/list", {}))["tools"]}
    assert "execution" not in tools["search_papers"]
    assert (await caller.error("tasks/get", {"taskId": "x"}))["code"] == -32601
    # params.task means nothing before 2025-11-25: the call is a plain one.
    result = await caller.result(
        "tools/call", {"name": "search_papers", "arguments": {"query": "attention"}, "task": {}}
    )
    assert "task" not in result
    assert result["structuredContent"]["session_id"]


async def test_scopes_and_audit_apply_to_tasks(caller_of, library, committed):
    owner = caller_of()
    library(owner.membership.tenant)
    await owner.start()
    task_id = await owner.start_task()
    events = AuditEvent.objects.filter(session_id=owner.session_id, action=AuditAction.TOOL_CALLED)
    [event] = [e async for e in events]
    assert event.target == "search_papers"
    assert event.detail["result"]["task_id"] == task_id

    reader = caller_of(owner.membership, scope="mcp:read")
    await reader.start()
    # Starting the task needs the tool's scope, cancelling needs mcp:write; reading needs mcp:read.
    refused = await reader.error(
        "tools/call", {"name": "search_papers", "arguments": {"query": "x"}, "task": {}}
    )
    assert refused["code"] == -32001
    assert (await reader.result("tasks/get", {"taskId": task_id}))["taskId"] == task_id
    assert (await reader.error("tasks/cancel", {"taskId": task_id}))["code"] == -32001
    await owner.result("tasks/cancel", {"taskId": task_id})


async def test_the_sdk_client_reaches_tasks_get_but_cannot_call_a_tool_as_a_task(
    server, jobs_worker, committed, tenant_toolset
):
    tenant_toolset("acme", "research", enabled=True)
    alice = committed(Membership.objects.get, user__username="alice")
    job = committed(search_start, tenant_id=alice.tenant_id, user_id=alice.user_id, query="attention")
    get = GetTaskRequest(params=GetTaskRequestParams(task_id=str(job.id)))
    async with sdk_client(server, Person("alice")) as (client, _):
        assert client.protocol_version == "2025-11-25"
        task = await client.session.send_request(get, GetTaskResult)
        assert task.task_id == str(job.id)
        as_task = CallToolRequest(
            params=CallToolRequestParams(
                name="search_papers", arguments={"query": "attention"}, task=TaskMetadata(ttl=1000)
            )
        )
        # The server answers a CreateTaskResult; the client checks it as a CallToolResult.
        with pytest.raises(ValidationError):
            await client.session.send_request(as_task, CallToolResult)

    async with sdk_client(server, Person("alice"), mode="2026-07-28") as (client, _):
        with pytest.raises(MCPError) as refused:
            await client.session.send_request(get, GetTaskResult)
        # On 2026-07-28 tasks/get is the tasks extension's (mcp_gateway.pipeline.tasks_2026_07_28), offered to
        # acme (ask_question runs as a task): the 2025-11-25 request carries neither the Mcp-Name
        # header the extension requires (-32020) nor the extension's declaration (-32021), and a
        # research job is not a tool task either way.
        assert refused.value.error.code in {-32020, -32021}
