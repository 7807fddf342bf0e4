"""A change an MCP client can see in one of its tool tasks (a job of kind ``mcp.tool_call``: its
state, its checkpoint, its progress message), however it is written (the jobs worker, a
cancellation, an expiry, SQL), is announced with ``NOTIFY gatehouse_mcp_task_status`` once it
commits, so the worker holding a ``subscriptions/listen`` stream that names the task can send
``notifications/tasks/status`` (``mcp_gateway.pipeline.task_status_2026_07_28``). The payload is ids only: the stream
reads the task itself, as its own caller. PostgreSQL only."""

from __future__ import annotations

from typing import Any

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION gatehouse_tool_task_status_notify() RETURNS trigger AS $$
BEGIN
    IF NEW.kind = 'mcp.tool_call' AND (
        OLD.state IS DISTINCT FROM NEW.state
        OR OLD.checkpoint_kind IS DISTINCT FROM NEW.checkpoint_kind
        OR OLD.checkpoint IS DISTINCT FROM NEW.checkpoint
        OR OLD.progress_message IS DISTINCT FROM NEW.progress_message
    ) THEN
        PERFORM pg_notify(
            'gatehouse_mcp_task_status',
            json_build_object('task', NEW.id::text, 'tenant', NEW.tenant_id, 'user', NEW.user_id)::text
        );
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER gatehouse_tool_task_status_notify
AFTER UPDATE ON jobs_job
FOR EACH ROW EXECUTE FUNCTION gatehouse_tool_task_status_notify();
"""

DROP = """
DROP TRIGGER IF EXISTS gatehouse_tool_task_status_notify ON jobs_job;
DROP FUNCTION IF EXISTS gatehouse_tool_task_status_notify();
"""


def _create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def _drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_initial")]

    operations = [migrations.RunPython(_create, _drop)]
