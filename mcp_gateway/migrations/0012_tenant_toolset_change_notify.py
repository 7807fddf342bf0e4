"""A change to a tenant's toolsets, however it is written (the admin, ``manage.py toolsets``, SQL),
is announced with ``NOTIFY gatehouse_mcp_list_changed`` once it commits, so every worker can tell
its ``subscriptions/listen`` streams (``mcp_gateway.pipeline.list_changes``). PostgreSQL only."""

from __future__ import annotations

from typing import Any

from django.db import migrations

CREATE = """
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

CREATE TRIGGER gatehouse_tenant_toolset_notify
AFTER INSERT OR UPDATE OR DELETE ON mcp_gateway_tenanttoolset
FOR EACH ROW EXECUTE FUNCTION gatehouse_tenant_toolset_notify();
"""

DROP = """
DROP TRIGGER IF EXISTS gatehouse_tenant_toolset_notify ON mcp_gateway_tenanttoolset;
DROP FUNCTION IF EXISTS gatehouse_tenant_toolset_notify();
"""


def _create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def _drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("mcp_gateway", "0011_session_verbose_name")]

    operations = [migrations.RunPython(_create, _drop)]
