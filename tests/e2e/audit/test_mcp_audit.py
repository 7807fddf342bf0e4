"""Every MCP action an operator may need to account for leaves exactly one audit row."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError

from core.audit.trail import REDACTED
from core.models import AuditAction, AuditEvent, AuditOutcome
from tests.e2e.harness import Person, sdk_client
from tests.e2e.oauth_driver import minted_sdk_client
from tests.e2e.stamping import StampingTransport, audit_events

pytestmark = pytest.mark.django_db


async def test_a_session_and_a_tool_call_are_audited_once_each_with_who_where_and_which_request(server):
    transport = StampingTransport()
    async with sdk_client(server, Person("alice"), transport=transport) as (client, storage):
        await client.call_tool("whoami", {})
    assert storage.client_info is not None
    client_id = storage.client_info.client_id
    [session_id] = transport.session_ids

    [created] = await audit_events(transport.request_ids("initialize")[0])
    [called] = await audit_events(transport.request_ids("tools/call")[0])
    [ended] = await audit_events(transport.request_ids("DELETE")[0])

    for event in (created, called, ended):
        assert event.user is not None
        assert event.user.username == event.username == "alice"
        assert event.tenant is not None
        assert event.tenant.slug == "acme"
        assert event.application is not None
        assert event.application.client_id == event.client_id == client_id
        assert event.session_id == session_id
        assert event.ip == "127.0.0.1"
    assert (created.action, created.outcome) == (AuditAction.SESSION_CREATED, AuditOutcome.OK)
    assert (called.action, called.outcome, called.target) == (
        AuditAction.TOOL_CALLED,
        AuditOutcome.OK,
        "whoami",
    )
    assert called.duration_ms is not None
    assert called.duration_ms > 0
    assert called.detail["arguments"] == {}
    assert (ended.action, ended.detail["reason"]) == (AuditAction.SESSION_TERMINATED, "client")
    # Nothing else in this session was audited (listing tools is not an audited action).
    assert await AuditEvent.objects.filter(session_id=session_id).acount() == 3


async def test_a_call_refused_for_a_missing_scope_is_audited_as_permission_denied(server, committed):
    transport = StampingTransport()
    async with minted_sdk_client(committed, server, Person("bob"), transport=transport) as (client, _):
        with pytest.raises(MCPError):
            await client.call_tool("set_display_name", {"display_name": "Bobby"})

    [denied] = await audit_events(transport.request_ids("tools/call")[0])
    assert (denied.action, denied.outcome, denied.target) == (
        AuditAction.PERMISSION_DENIED,
        AuditOutcome.DENIED,
        "set_display_name",
    )
    assert denied.username == "bob"
    assert denied.detail["code"] == -32001
    assert denied.detail["data"]["missing"] == ["mcp:write"]


async def test_failed_and_invalid_calls_are_audited_with_their_error_code(faults_server, committed):
    transport = StampingTransport()
    async with minted_sdk_client(committed, faults_server, Person("alice"), transport=transport) as (
        client,
        _,
    ):
        with pytest.raises(MCPError):
            await client.call_tool("fail_not_found", {})
        with pytest.raises(MCPError):
            await client.call_tool("count_with_progress", {"steps": "many"})
        with pytest.raises(MCPError):
            await client.call_tool("no_such_tool", {})

    failed, invalid, unknown = [(await audit_events(rid))[0] for rid in transport.request_ids("tools/call")]
    assert (failed.action, failed.outcome, failed.target) == (
        AuditAction.TOOL_CALLED,
        AuditOutcome.ERROR,
        "fail_not_found",
    )
    assert failed.detail["code"] == -32002
    assert (invalid.outcome, invalid.detail["code"]) == (AuditOutcome.ERROR, -32602)
    assert (unknown.target, unknown.outcome, unknown.detail["code"]) == ("no_such_tool", "error", -32602)


async def test_secret_arguments_never_reach_the_audit_trail(faults_server, committed):
    transport = StampingTransport()
    note = "x" * 500
    async with minted_sdk_client(committed, faults_server, Person("alice"), transport=transport) as (
        client,
        _,
    ):
        result = await client.call_tool("remember", {"note": note, "pin": "1234", "api_key": "sk-live-abc"})
    assert result.is_error is False

    [event] = await audit_events(transport.request_ids("tools/call")[0])
    arguments = event.detail["arguments"]
    assert arguments["pin"] == arguments["api_key"] == REDACTED
    assert arguments["note"].startswith("xxx")
    assert len(arguments["note"]) < len(note)
    assert "1234" not in json.dumps(event.detail)
    assert "sk-live" not in json.dumps(event.detail)


async def test_a_resource_read_is_audited(server, committed, tenant_toolset):
    tenant_toolset("acme", "conformance", enabled=True)
    transport = StampingTransport()
    async with minted_sdk_client(committed, server, Person("alice"), transport=transport) as (client, _):
        await client.read_resource("test://static-text")

    [event] = await audit_events(transport.request_ids("resources/read")[0])
    assert (event.action, event.outcome, event.target) == (
        AuditAction.RESOURCE_READ,
        AuditOutcome.OK,
        "test://static-text",
    )
    assert event.tenant_id is not None
    assert event.username == "alice"


async def test_a_stand_alone_2026_call_is_audited_without_a_session(server, committed):
    transport = StampingTransport()
    async with minted_sdk_client(
        committed, server, Person("alice"), mode="2026-07-28", transport=transport
    ) as (client, _):
        await client.call_tool("whoami", {})

    [event] = await audit_events(transport.request_ids("tools/call")[0])
    assert (event.action, event.outcome, event.target) == (AuditAction.TOOL_CALLED, AuditOutcome.OK, "whoami")
    assert event.session_id == ""
    assert event.username == "alice"
