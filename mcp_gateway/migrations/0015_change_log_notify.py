"""Every change a tenant's clients are told of goes through the change log (``ChangeEvent``): a
toolset turned on or off is written there by the trigger that used to send the ``NOTIFY`` itself
(0012), and a trigger on the log sends ``NOTIFY gatehouse_mcp_list_changed`` with the row once it
commits, so every worker can tell its streams, and a client that reconnects with ``Last-Event-ID``
can be told what it missed. PostgreSQL only."""

from __future__ import annotations

from typing import Any

from django.db import migrations

TOOLSET = """
CREATE OR REPLACE FUNCTION gatehouse_tenant_toolset_notify() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND (
        TG_OP = 'DELETE' OR OLD.tenant_id <> NEW.tenant_id OR OLD.toolset <> NEW.toolset
    ) THEN
        INSERT INTO mcp_gateway_changeevent (tenant_id, kind, toolset, uri, created)
        VALUES (OLD.tenant_id, 'toolset', OLD.toolset, '', now());
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (
        OLD.enabled IS DISTINCT FROM NEW.enabled
        OR OLD.tenant_id <> NEW.tenant_id OR OLD.toolset <> NEW.toolset
    )) THEN
        INSERT INTO mcp_gateway_changeevent (tenant_id, kind, toolset, uri, created)
        VALUES (NEW.tenant_id, 'toolset', NEW.toolset, '', now());
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

LOG = """
CREATE OR REPLACE FUNCTION gatehouse_change_event_notify() RETURNS trigger AS $$
BEGIN
    -- A NOTIFY payload is limited to 8000 bytes: a long URI is left for the listener to read.
    PERFORM pg_notify(
        'gatehouse_mcp_list_changed',
        json_build_object(
            'id', NEW.id, 'tenant', NEW.tenant_id, 'kind', NEW.kind, 'toolset', NEW.toolset,
            'uri', CASE WHEN octet_length(NEW.uri) <= 4000 THEN NEW.uri END
        )::text
    );
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER gatehouse_change_event_notify
AFTER INSERT ON mcp_gateway_changeevent
FOR EACH ROW EXECUTE FUNCTION gatehouse_change_event_notify();
"""

# 0012's function, as it was.
TOOLSET_BEFORE = """
CREATE OR REPLACE FUNCTION gatehouse_tenant_toolset_notify() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND (
        TG_OP = 'DELETE' OR OLD.tenant_id <> NEW.tenant_id OR OLD.toolset <> NEW.toolset
    ) THEN
        PERFORM pg_notify(
            'gatehouse_mcp_list_changed',
            json_build_object('tenant', OLD.tenant_id, 'toolset', OLD.toolset)::text
        );
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (
        OLD.enabled IS DISTINCT FROM NEW.enabled
        OR OLD.tenant_id <> NEW.tenant_id OR OLD.toolset <> NEW.toolset
    )) THEN
        PERFORM pg_notify(
            'gatehouse_mcp_list_changed',
            json_build_object('tenant', NEW.tenant_id, 'toolset', NEW.toolset)::text
        );
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

DROP_LOG = """
DROP TRIGGER IF EXISTS gatehouse_change_event_notify ON mcp_gateway_changeevent;
DROP FUNCTION IF EXISTS gatehouse_change_event_notify();
"""


def _create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(LOG)
        schema_editor.execute(TOOLSET)


def _drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TOOLSET_BEFORE)
        schema_editor.execute(DROP_LOG)


class Migration(migrations.Migration):
    dependencies = [("mcp_gateway", "0014_change_log_and_resource_subscriptions")]

    operations = [migrations.RunPython(_create, _drop)]
