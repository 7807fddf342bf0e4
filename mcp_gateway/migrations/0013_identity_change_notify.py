"""A change to anything a bearer token resolves to (its row, its user's account, membership or role,
its tenant, its client, the caller's live session), however it is written (a revocation, the admin,
a refresh, SQL), is announced with ``NOTIFY gatehouse_identity_changed`` once it commits, naming
what changed (``{"kind": "user", "id": 7}``), so every worker forgets what it kept of it
(``mcp_gateway.kernel.identity_cache``). Changes nothing kept can depend on are not announced: a login's
``last_login``, a session's ``last_seen`` touch (moved back, it is announced), an expired token's deletion, an ended session's
purge. PostgreSQL only."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION gatehouse_identity_notify() RETURNS trigger AS $$
DECLARE
    old_row jsonb := to_jsonb(OLD);
    new_row jsonb;
    watched text;
    changed boolean := TG_OP = 'DELETE' OR TG_ARGV[2] = '';
BEGIN
    -- TG_ARGV: the kind of change; the column of OLD that names it; the columns whose update
    -- matters (any, if ''); and what makes a row one nothing can keep any more (a past 'expires',
    -- a set 'terminated_at'). Columns are read through jsonb, so that no trigger depends on one
    -- and a migration may still alter it.
    IF TG_ARGV[3] = 'expires' AND (old_row ->> 'expires')::timestamptz <= now() THEN
        RETURN NULL;
    END IF;
    IF TG_ARGV[3] = 'terminated_at' AND old_row ->> 'terminated_at' IS NOT NULL THEN
        RETURN NULL;
    END IF;
    IF NOT changed THEN
        new_row := to_jsonb(NEW);
        FOREACH watched IN ARRAY string_to_array(TG_ARGV[2], ',') LOOP
            IF right(watched, 1) = '<' THEN
                -- A timestamp that matters only when it goes back (a session's last_seen: a kept
                -- older one is safe, it only makes the worker read the row again).
                watched := rtrim(watched, '<');
                changed := changed OR
                    (new_row ->> watched)::timestamptz < (old_row ->> watched)::timestamptz;
            ELSE
                changed := changed OR (old_row -> watched) IS DISTINCT FROM (new_row -> watched);
            END IF;
        END LOOP;
    END IF;
    IF changed THEN
        PERFORM pg_notify(
            'gatehouse_identity_changed',
            json_build_object('kind', TG_ARGV[0], 'id', old_row -> TG_ARGV[1])::text
        );
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

# (model, kind, column naming it, columns whose update matters (all if ""; "<": only going back),
# gone-for-good column)
TRIGGERS = [
    ("oauth.AccessToken", "token", "id", "", "expires"),
    ("accounts.Membership", "user", "user_id", "", ""),
    (settings.AUTH_USER_MODEL, "user", "id", "is_active,username", ""),
    ("accounts.Tenant", "tenant", "id", "is_active,slug,name", ""),
    (settings.OAUTH2_PROVIDER_APPLICATION_MODEL, "application", "id", "client_id,name", ""),
    (
        "mcp_gateway.McpSession",
        "session",
        "id",
        "terminated_at,log_level,scopes,user_id,tenant_id,application_id,last_seen<",
        "terminated_at",
    ),
]


def _trigger(apps: Any, model: str) -> tuple[str, str]:
    meta = apps.get_model(model)._meta
    return f"gatehouse_identity_{meta.model_name}", meta.db_table


def _create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION)
    for model, kind, column, watched, gone in TRIGGERS:
        name, table = _trigger(apps, model)
        schema_editor.execute(
            f"CREATE TRIGGER {name} AFTER UPDATE OR DELETE ON {schema_editor.quote_name(table)} "
            f"FOR EACH ROW EXECUTE FUNCTION gatehouse_identity_notify('{kind}', '{column}', '{watched}', '{gone}')"
        )


def _drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for model, *_ in TRIGGERS:
        name, table = _trigger(apps, model)
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name} ON {schema_editor.quote_name(table)}")
    schema_editor.execute("DROP FUNCTION IF EXISTS gatehouse_identity_notify()")


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_gateway", "0012_tenant_toolset_change_notify"),
        ("accounts", "0003_remembered_consent_moves_to_oauth"),
        ("oauth", "0008_serviceclient"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        migrations.swappable_dependency(settings.OAUTH2_PROVIDER_APPLICATION_MODEL),
    ]

    operations = [migrations.RunPython(_create, _drop)]
