"""The tasks extension of 2026-07-28 (``io.modelcontextprotocol/tasks``) through the official SDK
client, as a client author would use it: a ``ClientExtension`` whose ``ResultClaim`` takes the flat
``CreateTaskResult`` and follows the task with ``tasks/get`` until it is terminal, so
``Client.call_tool`` answers the tool's own result. Over real HTTP against two Daphne replicas that
share the database (the session's gateway servers): every ``tasks/*`` request goes to the replica
that did not start the task, and the steps run in their ``manage.py jobs_worker`` (a queue only it
takes, the same environment, the model scripted through ``LLM_MOCK_RESPONSES_FILE``, which each test
writes first)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import httpx2
import pytest
from asgiref.sync import sync_to_async
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Request, RequestParams, Result, TextContent
from pydantic import ConfigDict

from core.models import AuditAction, AuditEvent
from data_agent.models import Ontology
from data_agent.sample import ONTOLOGY_NAME
from jobs.models import Job
from tests.e2e.conftest import GATEWAY_WORKER_ID
from tests.e2e.data_agent.test_ask_question import (
    CAVEAT,
    CHART,
    PLAN,
    REVENUE_BY_REGION,
    ROUTE,
    _script_writer,
)
from tests.e2e.harness import DaphneServer, Person, sdk_client
from tests.e2e.stamping import StampingTransport, audit_events
from tests.jobs.worker_process import JobsWorkerProcess
from tests.support.factories import LanguageModelFactory

pytestmark = pytest.mark.django_db

TASKS = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
UNKNOWN_TASK = -32602
TERMINAL = frozenset({"completed", "failed", "cancelled"})
# slow_compute's longest sleep: a step that ran for less than this was stopped.
SLOW_SECONDS = 120
POLLS = 1200
POLL_SECONDS = 0.1

ACK = "complete"
Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


class _Flat(Result):
    """A result whose every key is known: a nested ``task``, a ``requestState`` or a v1 ``ttl``
    would fail validation, so the tests check the wire's shape as well as its values."""

    model_config = ConfigDict(extra="forbid")


class CreateTaskResult(_Flat):
    result_type: Literal["task"]
    task_id: str
    status: Status
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None


class DetailedTask(_Flat):
    result_type: Literal["complete"]
    task_id: str
    status: Status
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class Ack(_Flat):
    result_type: Literal["complete"]


class TaskParams(RequestParams):
    task_id: Any


class UpdateParams(TaskParams):
    input_responses: Any


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"  # SEP-2663: the task methods carry the task id in Mcp-Name


class UpdateTask(Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


async def task_get(session: ClientSession, task_id: Any) -> DetailedTask:
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), DetailedTask)


async def task_update(session: ClientSession, task_id: Any, responses: Any) -> Ack:
    request = UpdateTask(params=UpdateParams(task_id=task_id, input_responses=responses))
    return await session.send_request(request, Ack)


async def task_cancel(session: ClientSession, task_id: Any) -> Ack:
    return await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), Ack)


async def task_settled(session: ClientSession, task_id: str) -> DetailedTask:
    for _ in range(POLLS):
        task = await task_get(session, task_id)
        if task.status in TERMINAL:
            return task
        await asyncio.sleep(POLL_SECONDS)
    raise AssertionError(f"task {task_id} stayed {task.status}")


class TasksExtension(ClientExtension):
    """The client half of the extension: declares it and resolves each task into its result."""

    identifier = TASKS

    def __init__(self) -> None:
        self.created: list[CreateTaskResult] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(self, created: CreateTaskResult, context: ClaimContext) -> CallToolResult:
        self.created.append(created)
        task = await task_settled(context.session, created.task_id)
        if task.status != "completed" or task.result is None:
            raise AssertionError(f"task {task.task_id} ended {task.status}: {task.error}")
        return CallToolResult.model_validate(task.result, by_name=False)


class Replicas(StampingTransport):
    """A load balancer that sends the task methods to the second replica and the rest (the OAuth
    discovery, tools/list, tools/call) to the first; each request stamped with its own id."""

    def __init__(self, first: DaphneServer, second: DaphneServer) -> None:
        super().__init__()
        self.first, self.second = first.port, second.port
        self.served: list[tuple[str, int]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        method = request.headers.get("mcp-method", "")
        port = self.second if method.startswith("tasks/") else self.first
        request.url = request.url.copy_with(port=port)
        if method:
            self.served.append((method, port))
        return await super().handle_async_request(request)


@pytest.fixture
def first(gateway_server) -> DaphneServer:
    """The replica the tasks start on."""
    return gateway_server


@pytest.fixture
def second(second_gateway_server) -> DaphneServer:
    """The replica every ``tasks/*`` request goes to."""
    return second_gateway_server


@pytest.fixture
def worker(gateway_jobs_worker) -> JobsWorkerProcess:
    return gateway_jobs_worker


@pytest.fixture
def script(script_path):
    return _script_writer(script_path)


@pytest.fixture
def acme_sales(demo) -> Ontology:
    return Ontology.objects.select_related("data_source").get(tenant__slug="acme", name=ONTOLOGY_NAME)


@pytest.fixture
def acme_model(committed) -> None:
    from accounts.models import Tenant

    committed(
        LanguageModelFactory,
        tenant=Tenant.objects.get(slug="acme"),
        name="Scripted",
        model="openai/gpt-4o-mini",
        is_default=True,
    )


@pytest.fixture
def conformance(tenant_toolset) -> None:
    """slow_compute and the other task fixtures for acme and globex (so the extension is offered to
    carol too, and her refusal is the unknown task, not a method nobody serves)."""
    tenant_toolset("acme", "conformance", enabled=True)
    tenant_toolset("globex", "conformance", enabled=True)


def _tasks_client(first: DaphneServer, second: DaphneServer, person: str, **options: Any):
    transport = Replicas(first, second)
    extension = TasksExtension()
    client = sdk_client(
        first, Person(person), mode=VERSION, transport=transport, extensions=[extension], **options
    )
    return client, transport, extension


@sync_to_async
def _running_step(task_id: str) -> str | None:
    """The task queue's id of the task's step once the worker runs it (claimed, not finished)."""
    job = Job.objects.get(pk=task_id)
    return job.step_task_id if job.step_worker == GATEWAY_WORKER_ID and job.step_task_id else None


@sync_to_async
def _step_run(step_id: str) -> tuple[str, float | None]:
    """The status of the task queue's row of a step, and how long it ran."""
    from django_tasks_db.models import DBTaskResult

    row = DBTaskResult.objects.get(pk=step_id)
    ran = (row.finished_at - row.started_at).total_seconds() if row.finished_at and row.started_at else None
    return row.status, ran


async def test_a_task_started_on_one_replica_is_answered_by_another(
    first, second, worker, acme_sales, acme_model, script
):
    script(
        planner=PLAN,
        navigator=ROUTE,
        sql_builder={"sql": REVENUE_BY_REGION, "explanation": "Line totals per region."},
        verifier={"ok": True, "caveats": [CAVEAT]},
        explainer={"narrative": "Sales by region, last quarter.", "chart": CHART},
    )
    arguments = {
        "ontologyId": str(acme_sales.id),
        "question": "What were total sales by region last quarter?",
    }
    # Without the extension the same call is a plain one: the answer to compare with.
    async with sdk_client(first, Person("alice"), mode=VERSION) as (client, _):
        plain = await client.call_tool("ask_question", arguments)
    assert not plain.is_error, plain

    tasks_client, transport, extension = _tasks_client(first, second, "alice")
    async with tasks_client as (client, _):
        answered = await client.call_tool("ask_question", arguments)

    [created] = extension.created
    assert (created.status, created.ttl_ms is None or created.ttl_ms > 0) == ("working", True)
    assert answered.content == plain.content
    assert answered.structured_content == plain.structured_content
    assert answered.structured_content is not None
    assert answered.structured_content["status"] == "answered"
    assert all(isinstance(block, TextContent) for block in answered.content)
    # The call went to the first replica, every tasks/get to the second.
    methods = {
        method: {port for m, port in transport.served if m == method} for method, _ in transport.served
    }
    assert methods["tools/call"] == {first.port}
    assert methods["tasks/get"] == {second.port}

    # The audit trail: the call that started the task, and the worker's call that ran it.
    [request_id] = transport.request_ids("tools/call")
    [started] = _tool_rows(await audit_events(request_id))
    assert (started.action, started.target, started.outcome) == (
        AuditAction.TOOL_CALLED,
        "ask_question",
        "ok",
    )
    assert started.detail["result"]["task_id"] == created.task_id
    assert started.user is not None
    assert started.user.username == "alice"
    ran_rows = await audit_events(f"task:{created.task_id}")
    [ran] = _tool_rows(ran_rows)
    # The worker's model calls took the governed path, each with its row under the task's id.
    assert {row.detail["feature"] for row in ran_rows if row.action == AuditAction.MODEL_CALLED} == {
        "ask_question"
    }
    assert (ran.action, ran.target, ran.outcome) == (AuditAction.TOOL_CALLED, "ask_question", "ok")
    assert ran.user is not None
    assert ran.user.username == "alice"
    assert ran.tenant is not None
    assert ran.tenant.slug == "acme"
    noted = ran.detail["result"]
    assert (noted["status"], noted["sql"]) == ("answered", answered.structured_content["sql"])
    assert noted["modelCalls"] == 5
    assert await AuditEvent.objects.filter(detail__result__task_id=created.task_id).acount() == 1


async def test_a_task_cancelled_mid_run_stays_cancelled_and_its_step_stops(
    first, second, worker, conformance
):
    tasks_client, transport, _ = _tasks_client(first, second, "alice")
    async with tasks_client as (client, _):
        created = await client.session.call_tool(
            "slow_compute", {"seconds": SLOW_SECONDS, "label": "long"}, allow_claimed=True
        )
        assert isinstance(created, CreateTaskResult), created
        task_id = created.task_id
        step_id = None
        for _ in range(POLLS):  # until the worker runs the step: the cancel lands mid-run
            if (step_id := await _running_step(task_id)) is not None:
                break
            await asyncio.sleep(POLL_SECONDS)
        assert step_id is not None, "the worker never took the step"
        assert (await task_get(client.session, task_id)).status == "working"

        assert (await task_cancel(client.session, task_id)).result_type == ACK
        cancelled = await task_get(client.session, task_id)
        assert (cancelled.status, cancelled.result, cancelled.error) == ("cancelled", None, None)
        assert cancelled.poll_interval_ms is None
        # The worker is free again: the next task runs and completes.
        following = await client.call_tool("slow_compute", {"seconds": 0, "label": "next"})
        assert following.content[0].text == "Computed next after 0 s."
        # Cancelling again is the same ack, and nothing brings the task back.
        assert (await task_cancel(client.session, task_id)).result_type == ACK
        assert (await task_get(client.session, task_id)).status == "cancelled"
        with pytest.raises(MCPError) as not_waiting:
            await task_update(client.session, task_id, {"x": {"action": "accept"}})
        assert not_waiting.value.error.code == -32602
        assert (await task_get(client.session, task_id)).status == "cancelled"

    # The step ended without sleeping its 120 s out (a cancel stops the running call).
    status, ran = await _step_run(step_id)
    assert status != "RUNNING"
    assert ran is not None
    assert ran < SLOW_SECONDS
    job = await Job.objects.aget(pk=task_id)
    assert job.state == "cancelled"
    assert job.result is None or "Computed" not in json.dumps(job.result)
    assert {port for method, port in transport.served if method.startswith("tasks/")} == {second.port}


async def test_another_persons_task_id_is_an_unknown_task(first, second, worker, conformance):
    alice_client, _, _ = _tasks_client(first, second, "alice")
    async with alice_client as (alice, _):
        created = await alice.session.call_tool(
            "slow_compute", {"seconds": SLOW_SECONDS, "label": "alice's"}, allow_claimed=True
        )
        assert isinstance(created, CreateTaskResult), created
        task_id = created.task_id
        # bob: a viewer of the same tenant; carol: another tenant's admin.
        for stranger in ("bob", "carol"):
            stranger_client, _, _ = _tasks_client(first, second, stranger)
            async with stranger_client as (client, _):
                for attempt in (
                    task_get(client.session, task_id),
                    task_update(client.session, task_id, {"confirm": {"action": "accept"}}),
                    task_cancel(client.session, task_id),
                ):
                    with pytest.raises(MCPError) as refusal:
                        await attempt
                    assert refusal.value.error.code == UNKNOWN_TASK, (stranger, refusal.value.error)
                    assert "Unknown task" in refusal.value.error.message
        # alice's task is untouched: still hers, still running, then hers to cancel.
        assert (await task_get(alice.session, task_id)).status == "working"
        assert (await task_cancel(alice.session, task_id)).result_type == ACK
        assert (await task_get(alice.session, task_id)).status == "cancelled"


HOSTILE_IDS = {
    "nul": "a\u0000b",
    "long": "x" * 5000,
    "path": "../../etc/passwd",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "newline": "abc\r\nX-Injected: 1",
    "non-ascii": "tâche-😀",
    "sql": "' OR 1=1 --",
}


@pytest.mark.parametrize("task_id", list(HOSTILE_IDS.values()), ids=list(HOSTILE_IDS))
async def test_hostile_task_ids_through_the_sdk_are_unknown_tasks(first, second, conformance, task_id):
    # The SDK carries any id in Mcp-Name (base64 where a header cannot hold it), so each reaches
    # the server's own check and is answered as an unknown task, never a 500.
    tasks_client, _, _ = _tasks_client(first, second, "alice")
    async with tasks_client as (client, _):
        for attempt in (
            task_get(client.session, task_id),
            task_update(client.session, task_id, {}),
            task_cancel(client.session, task_id),
        ):
            with pytest.raises(MCPError) as refusal:
                await attempt
            assert refusal.value.error.code == UNKNOWN_TASK, refusal.value.error


@pytest.mark.parametrize(
    "responses",
    [
        {f"k{i}": {"action": "accept"} for i in range(65)},
        {"k": {"action": "accept", "content": {"name": "a\u0000b"}}},
        "not an object",
    ],
    ids=["too-many", "nul", "not-an-object"],
)
async def test_hostile_input_responses_are_refused_and_leave_the_task_alone(
    first, second, worker, conformance, responses
):
    tasks_client, _, _ = _tasks_client(first, second, "alice")
    async with tasks_client as (client, _):
        created = await client.session.call_tool("confirm_delete", {"filename": "a.txt"}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult), created
        with pytest.raises(MCPError) as refusal:
            await task_update(client.session, created.task_id, responses)
        assert refusal.value.error.code == -32602
        task = await task_get(client.session, created.task_id)
        assert task.status in {"working", "input_required"}
        assert (await task_cancel(client.session, created.task_id)).result_type == ACK


async def test_arguments_a_task_cannot_store_are_refused_through_the_sdk(first, second, conformance):
    tasks_client, _, extension = _tasks_client(first, second, "alice")
    async with tasks_client as (client, _):
        with pytest.raises(MCPError) as refusal:
            await client.call_tool("slow_compute", {"seconds": 0, "label": "a\u0000"})
    assert refusal.value.error.code == -32602
    assert extension.created == []


async def test_a_clarifying_question_is_answered_through_tasks_update_on_the_other_replica(
    first, second, worker, acme_sales, acme_model, script
):
    from data_agent.ask_tool import CLARIFY_INPUT

    clarify = {"action": "clarify", "clarifications": [{"question": "Which period?", "suggestions": ["Q3"]}]}
    script(
        planner=[clarify, PLAN],
        navigator=ROUTE,
        sql_builder={"sql": REVENUE_BY_REGION},
        verifier={"ok": True, "caveats": []},
        explainer={"narrative": "Here are the totals.", "chart": None},
    )

    async def never_asked(context, params):
        raise AssertionError("2026-07-28 has no back-channel: a task asks through tasks/get")

    # The client declares forms (elicitation), so the planner's question becomes the task's input.
    tasks_client, transport, _ = _tasks_client(first, second, "alice", elicitation_callback=never_asked)
    async with tasks_client as (client, _):
        created = await client.session.call_tool(
            "ask_question",
            {"ontologyId": str(acme_sales.id), "question": "Sales by region?"},
            allow_claimed=True,
        )
        assert isinstance(created, CreateTaskResult), created
        for _ in range(POLLS):
            waiting = await task_get(client.session, created.task_id)
            if waiting.status != "working":
                break
            await asyncio.sleep(POLL_SECONDS)
        assert waiting.status == "input_required", waiting
        assert waiting.input_requests is not None
        form = waiting.input_requests[CLARIFY_INPUT]
        assert form["method"] == "elicitation/create"
        assert form["params"]["requestedSchema"]["properties"]["answer1"]["title"] == "Which period?"
        answer = {CLARIFY_INPUT: {"action": "accept", "content": {"answer1": "Q3 2025"}}}
        assert (await task_update(client.session, created.task_id, answer)).result_type == ACK
        done = await task_settled(client.session, created.task_id)
    assert done.status == "completed", done
    assert done.result is not None
    answered = done.result["structuredContent"]
    assert answered["status"] == "answered"
    assert answered["rowCount"] == len(answered["rows"]) >= 3
    # The sealed requestState of the clarification round never reached the client.
    assert "requestState" not in json.dumps(waiting.model_dump(by_alias=True))
    assert {port for method, port in transport.served if method.startswith("tasks/")} == {second.port}


def _tool_rows(rows: list) -> list:
    """The tool call's own rows, without the ``model.called`` rows of the model calls it made."""
    return [row for row in rows if row.action != AuditAction.MODEL_CALLED]
