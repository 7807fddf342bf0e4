"""The tasks extension of 2026-07-28 (``mcp_gateway.pipeline.tasks_2026_07_28``) against an in-memory runner:
the wire shapes, the gating on the extension declared per request, the errors, hostile input."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from accounts.scopes import SCOPE_READ, SCOPE_WRITE
from core.errors import GatehouseError, NotFound
from core.identity import Identity
from mcp_gateway.kernel import tool_tasks_2026_07_28 as tool_tasks
from mcp_gateway.kernel.registry import Registry, Toolset, tool
from mcp_gateway.kernel.scope_keys import IDENTITY_KEY
from mcp_gateway.kernel.task_wire_2026_07_28 import create_task_result, detailed_task
from mcp_gateway.kernel.tool_tasks_2026_07_28 import (
    TASKS_EXTENSION,
    TOOL_TASK_SCOPE_KEY,
    ToolTask,
    tool_task_runner,
    tool_task_runner_register,
)
from mcp_gateway.pipeline import tasks_2026_07_28 as task_extension
from mcp_gateway.pipeline.tasks_2026_07_28 import (
    TaskExtensionGate,
    task_escalation_register,
    tool_task_escalate,
)
from tests.support.factories import IdentityFactory

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")
TASK_FIELDS_ONLY_ON_GET = {"result", "error", "inputRequests"}


class MemoryRunner:
    """A ``ToolTaskRunner`` that keeps tasks in a dict and runs nothing by itself."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[Identity, ToolTask]] = {}
        self.started: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.lookups: list[str] = []

    async def start(self, *, identity, tool, arguments, client_capabilities, ttl_ms) -> ToolTask:
        task = ToolTask(
            task_id=str(uuid.uuid4()),
            status="working",
            created_at=NOW,
            last_updated_at=NOW,
            ttl_ms=3_600_000,
            poll_interval_ms=500,
        )
        self.tasks[task.task_id] = (identity, task)
        self.started.append({"tool": tool, "arguments": arguments, "capabilities": client_capabilities})
        return task

    def _mine(self, identity: Identity, task_id: str) -> ToolTask:
        self.lookups.append(task_id)
        owner, task = self.tasks.get(task_id, (None, None))
        if (
            task is None
            or owner is None
            or (owner.user_id, owner.tenant_id)
            != (
                identity.user_id,
                identity.tenant_id,
            )
        ):
            raise NotFound()
        return task

    async def get(self, *, identity, task_id) -> ToolTask:
        return self._mine(identity, task_id)

    async def update(self, *, identity, task_id, input_responses) -> None:
        self._mine(identity, task_id)
        self.updates.append(input_responses)

    async def cancel(self, *, identity, task_id) -> None:
        task = self._mine(identity, task_id)
        self.cancelled.append(task_id)
        if task.status not in {"completed", "failed", "cancelled"}:
            self.tasks[task_id] = (self.tasks[task_id][0], replace(task, status="cancelled"))

    def settle(self, task_id: str, **changes: Any) -> None:
        owner, task = self.tasks[task_id]
        self.tasks[task_id] = (owner, replace(task, **changes))


@tool(name="quick", description="Never a task.", scopes=[SCOPE_READ], structured=False)
async def quick() -> str:
    return "quick"


@tool(name="maybe", description="A task when asked.", scopes=[SCOPE_READ], task_support="optional")
async def maybe() -> str:
    return "maybe"


@tool(name="always", description="Only a task.", scopes=[SCOPE_READ], task_support="required")
async def always() -> str:
    return "always"


@tool(name="gathers", description="Asks, then a task.", scopes=[SCOPE_READ], task_support="required")
async def gathers() -> str:
    return "gathers"


REGISTRY = Registry([Toolset(name="tasky", description="t", tools=(quick, maybe, always, gathers))])


def _identity(user_id: int = 1, tenant_id: int = 1, scopes: frozenset[str] | None = None) -> Identity:
    return IdentityFactory.build(
        user_id=user_id,
        username=f"u{user_id}",
        tenant_id=tenant_id,
        scopes=frozenset({SCOPE_READ, SCOPE_WRITE}) if scopes is None else scopes,
    )


def _meta(declares: bool) -> dict[str, Any]:
    extensions: dict[str, Any] = {TASKS_EXTENSION: {}} if declares else {}
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": extensions},
    }


def _ctx(
    method: str,
    params: dict[str, Any],
    *,
    declares: bool = True,
    identity: Identity | None = None,
    version: str = "2026-07-28",
    headers: dict[str, str] | None = None,
) -> SimpleNamespace:
    if headers is None:
        headers = {"mcp-method": method}
        if isinstance(params.get("taskId"), str):
            headers["mcp-name"] = params["taskId"]
    scope = {
        "type": "http",
        "headers": [(k.encode(), v.encode("latin-1")) for k, v in headers.items()],
        IDENTITY_KEY: identity or _identity(),
    }
    return SimpleNamespace(
        request_id=7,
        method=method,
        params={**params, "_meta": _meta(declares)},
        protocol_version=version,
        request=SimpleNamespace(scope=scope),
    )


class Next:
    """``call_next``: records that the rest of the chain ran, and answers ``result``."""

    def __init__(self, result: Any = None, effect: Any = None) -> None:
        self.calls = 0
        self.result = result if result is not None else {"content": [{"type": "text", "text": "plain"}]}
        self.effect = effect

    async def __call__(self, ctx: Any) -> Any:
        self.calls += 1
        if self.effect is not None:
            await self.effect(ctx)
        return dict(self.result)


@pytest.fixture
def runner(monkeypatch):
    previous = tool_task_runner()
    memory = MemoryRunner()
    tool_task_runner_register(runner=memory)

    async def enabled(*, tenant_id, registry):
        return frozenset({"tasky"}) if tenant_id == 1 else frozenset()

    monkeypatch.setattr(task_extension, "toolsets_enabled_async", enabled)
    # The only runner asked for a task id (the registered toolsets' own runners use the database).
    monkeypatch.setattr(task_extension, "tool_task_runners", lambda: (memory,))
    yield memory
    tool_task_runner_register(runner=previous)  # type: ignore[arg-type]


@pytest.fixture
def gate() -> TaskExtensionGate:
    return TaskExtensionGate(REGISTRY, MCPServer(name="test"))


async def _code(gate: TaskExtensionGate, ctx: Any, call_next: Any = None) -> int:
    with pytest.raises((MCPError, GatehouseError)) as raised:
        await gate(ctx, call_next or Next())
    error = raised.value
    if isinstance(error, MCPError):
        return error.error.code
    assert isinstance(error, GatehouseError)
    return error.jsonrpc_code


async def _started(gate: TaskExtensionGate, name: str = "maybe") -> Any:
    return await gate(_ctx("tools/call", {"name": name, "arguments": {}}), Next())  # type: ignore[arg-type]


# --- advertising -----------------------------------------------------------------------------------


async def test_discover_lists_the_extension_under_extensions_never_a_v1_tasks_slot(gate, runner):
    result = await gate(_ctx("server/discover", {}), Next({"capabilities": {"tools": {}}}))
    assert result["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}
    assert "tasks" not in result["capabilities"]


async def test_discover_says_nothing_to_a_tenant_without_a_task_tool(gate, runner):
    result = await gate(
        _ctx("server/discover", {}, identity=_identity(tenant_id=2)), Next({"capabilities": {}})
    )
    assert "extensions" not in result["capabilities"]


async def test_discover_says_nothing_without_a_runner(gate, runner):
    tool_task_runner_register(runner=None)  # type: ignore[arg-type]
    result = await gate(_ctx("server/discover", {}), Next({"capabilities": {}}))
    assert "extensions" not in result["capabilities"]


async def test_tools_list_marks_the_task_support_of_each_tool(gate, runner):
    listing = {"tools": [{"name": "quick"}, {"name": "maybe"}, {"name": "always"}]}
    result = await gate(_ctx("tools/list", {}), Next(listing))
    support = {entry["name"]: entry.get("execution") for entry in result["tools"]}
    assert support == {
        "quick": None,
        "maybe": {"taskSupport": "optional"},
        "always": {"taskSupport": "required"},
    }


async def test_older_versions_are_left_alone(gate, runner):
    call_next = Next()
    ctx = _ctx("tools/call", {"name": "always", "arguments": {}}, version="2025-11-25", declares=False)
    assert await gate(ctx, call_next) == call_next.result
    assert call_next.calls == 1
    assert not runner.started


# --- tools/call --------------------------------------------------------------------------------------


async def test_a_task_tool_answers_a_flat_create_task_result(gate, runner):
    call_next = Next()
    result = await gate(_ctx("tools/call", {"name": "maybe", "arguments": {"x": 1}}), call_next)
    assert call_next.calls == 0
    assert result["resultType"] == "task"
    assert result["status"] == "working"
    assert result["taskId"] in runner.tasks
    assert ISO.match(result["createdAt"])
    assert ISO.match(result["lastUpdatedAt"])
    assert result["ttlMs"] == 3_600_000
    assert result["pollIntervalMs"] == 500
    assert not {"task", "ttl", "pollInterval", "requestState", *TASK_FIELDS_ONLY_ON_GET} & set(result)
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]
    assert runner.started == [
        {
            "tool": "maybe",
            "arguments": {"x": 1},
            "capabilities": {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}},
        }
    ]


async def test_without_the_extension_an_optional_tool_runs_as_a_plain_call(gate, runner):
    call_next = Next()
    ctx = _ctx("tools/call", {"name": "maybe", "arguments": {}}, declares=False)
    assert await gate(ctx, call_next) == call_next.result
    assert call_next.calls == 1
    assert not runner.started


async def test_without_the_extension_a_required_tool_is_refused_with_32021(gate, runner):
    ctx = _ctx("tools/call", {"name": "always", "arguments": {}}, declares=False)
    with pytest.raises(MCPError) as raised:
        await gate(ctx, Next())
    assert raised.value.error.code == -32021
    assert raised.value.error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
    assert not runner.started


async def test_a_legacy_task_hint_never_makes_a_task_of_a_plain_tool(gate, runner):
    call_next = Next()
    ctx = _ctx("tools/call", {"name": "quick", "arguments": {}, "task": {"ttl": 60000, "pollInterval": 100}})
    assert await gate(ctx, call_next) == call_next.result
    assert not runner.started


async def test_a_call_not_from_http_runs_as_the_plain_call_so_a_task_never_starts_another(gate, runner):
    ctx = _ctx("tools/call", {"name": "maybe", "arguments": {}})
    ctx.request.scope["type"] = "stdio"
    call_next = Next()
    assert await gate(ctx, call_next) == call_next.result
    assert not runner.started


async def test_the_runners_own_call_of_a_tasks_tool_is_served_as_a_plain_call(gate, runner):
    ctx = _ctx("tools/call", {"name": "always", "arguments": {}}, declares=False)
    ctx.request.scope = {IDENTITY_KEY: _identity(), TOOL_TASK_SCOPE_KEY: "task-1"}
    call_next = Next()
    assert await gate(ctx, call_next) == call_next.result
    assert not runner.started


@pytest.mark.parametrize("arguments", [{"x": "a\x00b"}, {"a\x00": 1}, {"x": ["\ud800"]}])
async def test_arguments_that_cannot_be_stored_are_refused_before_a_task_exists(gate, runner, arguments):
    ctx = _ctx("tools/call", {"name": "maybe", "arguments": arguments})
    assert await _code(gate, ctx) == -32602
    assert not runner.started


async def test_a_tool_that_gathers_input_first_becomes_a_task_when_it_says_so(gate, runner):
    task_escalation_register(tool="gathers")

    async def first_round(ctx):
        return None

    first = Next({"resultType": "input_required", "inputRequests": {"k": {}}}, effect=first_round)
    ctx = _ctx("tools/call", {"name": "gathers", "arguments": {}})
    assert (await gate(ctx, first))["resultType"] == "input_required"
    assert not runner.started

    handler_ctx = SimpleNamespace(request_context=SimpleNamespace(request=ctx.request))

    async def final_round(ctx):
        assert await tool_task_escalate(handler_ctx, arguments={"user_name": "Alice"})  # type: ignore[arg-type]

    result = await gate(_ctx("tools/call", {"name": "gathers", "arguments": {}}), Next(effect=final_round))
    assert result["resultType"] == "task"
    assert not {"requestState", "inputRequests", "content"} & set(result)
    assert runner.started[0]["tool"] == "gathers"
    assert runner.started[0]["arguments"] == {"user_name": "Alice"}


async def test_escalating_outside_a_task_capable_call_carries_on_in_the_call(runner):
    handler_ctx = SimpleNamespace(request_context=SimpleNamespace(request=None))
    assert await tool_task_escalate(handler_ctx, arguments={}) is False  # type: ignore[arg-type]


# --- tasks/get, tasks/update, tasks/cancel ---------------------------------------------------------


async def test_get_shows_a_working_task_without_result_or_error(gate, runner):
    created = await _started(gate)
    got = await gate(_ctx("tasks/get", {"taskId": created["taskId"]}), Next())
    assert got["resultType"] == "complete"
    assert got["taskId"] == created["taskId"]
    assert got["status"] == "working"
    assert not (TASK_FIELDS_ONLY_ON_GET | {"requestState"}) & set(got)


async def test_get_inlines_a_completed_result_without_the_v1_related_task_meta(gate, runner):
    created = await _started(gate)
    result = {
        "content": [{"type": "text", "text": "done"}],
        "isError": False,
        "_meta": {"io.modelcontextprotocol/related-task": {"taskId": created["taskId"]}},
    }
    runner.settle(created["taskId"], status="completed", result=result)
    got = await gate(_ctx("tasks/get", {"taskId": created["taskId"]}), Next())
    assert got["status"] == "completed"
    assert got["result"] == {"content": [{"type": "text", "text": "done"}], "isError": False}


async def test_get_inlines_a_failed_tasks_error_and_no_result(gate, runner):
    created = await _started(gate)
    runner.settle(created["taskId"], status="failed", error={"code": -32603, "message": "crashed"})
    got = await gate(_ctx("tasks/get", {"taskId": created["taskId"]}), Next())
    assert got["error"] == {"code": -32603, "message": "crashed"}
    assert "result" not in got


async def test_a_failed_task_always_carries_a_json_rpc_error(gate, runner):
    created = await _started(gate)
    runner.settle(created["taskId"], status="failed", error=None)
    got = await gate(_ctx("tasks/get", {"taskId": created["taskId"]}), Next())
    assert isinstance(got["error"]["code"], int)
    assert isinstance(got["error"]["message"], str)


async def test_get_inlines_the_input_requests_of_a_waiting_task(gate, runner):
    created = await _started(gate)
    requests = {"confirm": {"method": "elicitation/create", "params": {"message": "sure?"}}}
    runner.settle(created["taskId"], status="input_required", input_requests=requests)
    got = await gate(_ctx("tasks/get", {"taskId": created["taskId"]}), Next())
    assert got["inputRequests"] == requests


async def test_update_and_cancel_answer_an_empty_ack(gate, runner):
    created = await _started(gate)
    task_id = created["taskId"]
    update = _ctx("tasks/update", {"taskId": task_id, "inputResponses": {"confirm": {"action": "accept"}}})
    updated = await gate(update, Next())
    assert {k: v for k, v in updated.items() if k != "_meta"} == {"resultType": "complete"}
    assert runner.updates == [{"confirm": {"action": "accept"}}]
    for _ in range(2):  # idempotent
        cancelled = await gate(_ctx("tasks/cancel", {"taskId": task_id}), Next())
        assert {k: v for k, v in cancelled.items() if k != "_meta"} == {"resultType": "complete"}
    assert runner.tasks[task_id][1].status == "cancelled"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_task_methods_need_the_extension_declared_in_the_request(gate, runner, method):
    params = {"taskId": "gate-test", "inputResponses": {}}
    assert await _code(gate, _ctx(method, params, declares=False)) == -32021
    assert not runner.lookups


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_another_persons_or_tenants_task_is_unknown(gate, runner, method):
    created = await _started(gate)
    params = {"taskId": created["taskId"], "inputResponses": {}}
    for stranger in (_identity(user_id=2), _identity(tenant_id=3)):
        # Tenant 3 has no task tool: the extension is not offered to it at all.
        code = await _code(gate, _ctx(method, params, identity=stranger))
        assert code == (-32602 if stranger.tenant_id == 1 else -32601)
    assert runner.tasks[created["taskId"]][1].status == "working"


@pytest.mark.parametrize(
    "task_id",
    ["tasks-conformance-nonexistent-12345", "a\x00b", "x" * 200_001, 42, None, {"$gt": ""}, ["a"], "\ud800"],
    ids=["unknown", "nul", "huge", "number", "none", "object", "list", "surrogate"],
)
async def test_a_task_id_that_is_not_one_of_yours_is_invalid_params(gate, runner, task_id):
    headers = {"mcp-method": "tasks/get"}
    if isinstance(task_id, str) and task_id.isprintable() and "\ud800" not in task_id:
        headers["mcp-name"] = task_id
    ctx = _ctx("tasks/get", {"taskId": task_id}, headers=headers)
    code = await _code(gate, ctx)
    assert code in {-32602, -32020}
    if code == -32602 and task_id != "tasks-conformance-nonexistent-12345":
        assert not runner.lookups  # screened before the runner sees it


async def test_the_mcp_name_header_must_carry_the_task_id(gate, runner):
    created = await _started(gate)
    wrong = {"mcp-method": "tasks/get", "mcp-name": "sep-2663-wrong-task-id"}
    assert await _code(gate, _ctx("tasks/get", {"taskId": created["taskId"]}, headers=wrong)) == -32020
    missing = {"mcp-method": "tasks/get"}
    assert await _code(gate, _ctx("tasks/get", {"taskId": created["taskId"]}, headers=missing)) == -32020
    padded = {"mcp-method": "tasks/get", "mcp-name": f"  {created['taskId']} "}
    got = await gate(_ctx("tasks/get", {"taskId": created["taskId"]}, headers=padded), Next())
    assert got["taskId"] == created["taskId"]


@pytest.mark.parametrize(
    "responses",
    [[], "yes", None, {"k": "a\x00"}, {f"k{i}": {} for i in range(65)}],
    ids=["list", "string", "none", "nul", "too-many"],
)
async def test_update_refuses_input_responses_it_cannot_hand_on(gate, runner, responses):
    created = await _started(gate)
    ctx = _ctx("tasks/update", {"taskId": created["taskId"], "inputResponses": responses})
    assert await _code(gate, ctx) == -32602
    assert not runner.updates


async def test_a_token_without_read_scope_cannot_follow_tasks(gate, runner):
    created = await _started(gate)
    viewer = _identity(scopes=frozenset())
    assert await _code(gate, _ctx("tasks/get", {"taskId": created["taskId"]}, identity=viewer)) == -32001


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
async def test_the_methods_the_extension_removed_are_not_found(gate, runner, method):
    assert await _code(gate, _ctx(method, {"taskId": "x"})) == -32601


async def test_without_a_runner_task_methods_are_not_found(gate, runner):
    tool_task_runner_register(runner=None)  # type: ignore[arg-type]
    assert await _code(gate, _ctx("tasks/get", {"taskId": "x"})) == -32601


# --- wire --------------------------------------------------------------------------------------------


def test_a_task_kept_until_deleted_says_ttl_null_and_omits_what_it_lacks():
    task = ToolTask(task_id="t", status="working", created_at=NOW, last_updated_at=NOW)
    wire = create_task_result(task)
    assert wire["ttlMs"] is None
    assert "pollIntervalMs" not in wire
    assert "statusMessage" not in wire
    assert detailed_task(replace(task, status="completed", result=None))["resultType"] == "complete"


async def test_a_toolsets_own_runner_runs_its_tools_tasks_and_answers_for_them(gate, runner, monkeypatch):
    own = MemoryRunner()
    monkeypatch.setattr(tool_tasks, "_tool_runners", {})
    tool_task_runner_register(runner=own, tools=frozenset({"maybe"}))
    monkeypatch.setattr(task_extension, "tool_task_runners", tool_tasks.tool_task_runners)
    assert tool_task_runner(tool="maybe") is own
    assert tool_task_runner(tool="always") is runner
    assert tool_tasks.tool_task_runners() == (own, runner)
    mine = (await _started(gate, "maybe"))["taskId"]
    theirs = (await _started(gate, "always"))["taskId"]
    assert [s["tool"] for s in own.started] == ["maybe"]
    assert [s["tool"] for s in runner.started] == ["always"]
    for task_id in (mine, theirs):
        assert (await gate(_ctx("tasks/get", {"taskId": task_id}), Next()))["taskId"] == task_id
        await gate(_ctx("tasks/cancel", {"taskId": task_id}), Next())
    assert own.cancelled == [mine]
    assert runner.cancelled == [theirs]
    # An id neither runner has: both were asked, and it is unknown.
    assert await _code(gate, _ctx("tasks/get", {"taskId": "nobody's"})) == -32602
