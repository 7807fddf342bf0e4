"""A benchmark database the size of a busy deployment's: 100,000 persisted MCP sessions, 100,000
access tokens and 1,000,000 audit rows, written into the real (migrated) tables, so every index and
constraint the models declare is there and maintained, by a few ``INSERT ... SELECT FROM
generate_series`` statements (about a minute for the audit rows on the 2-core machine).

The seeded rows are marked (``client_name``, ``request_id`` ``bench-seed``; tokens ``bench-seed-N``)
so a run keeps them while it deletes what earlier runs left. The sessions are seeded anew on every
run, because their ages must be relative to now: a fifth live (seen in the last half hour, so
within the idle lifetime and left alone by the session sweep), the rest ended in the last five days
(within retention). Audit rows spread over the last 290 days (within the 365 days kept); most are
``tool.called``, as on a gateway.
"""

from __future__ import annotations

import time

import psycopg

SESSIONS = 100_000
TOKENS = 100_000
AUDIT_ROWS = 1_000_000
SEED = "bench-seed"

_SESSIONS_SQL = """
WITH pairs AS (
    SELECT row_number() OVER (ORDER BY id) - 1 AS n, user_id, tenant_id FROM accounts_membership
), app AS (SELECT min(id) AS id FROM oauth2_provider_application)
INSERT INTO mcp_gateway_mcpsession (id, user_id, tenant_id, application_id, scopes, protocol_version,
    client_name, client_version, client_capabilities, log_level, created, last_seen, terminated_at,
    termination_reason)
SELECT 'seed-' || md5(g::text) || lpad(g::text, 7, '0'), p.user_id, p.tenant_id, app.id,
    'mcp:read mcp:write', '2025-11-25', %(seed)s, '1.0', '{"sampling": {}}'::jsonb, '',
    now() - interval '6 days', last_seen,
    CASE WHEN g %% 5 = 0 THEN NULL ELSE last_seen + interval '1 hour' END,
    CASE WHEN g %% 5 = 0 THEN '' ELSE 'expired' END
FROM generate_series(1, %(rows)s) AS g
CROSS JOIN app
CROSS JOIN LATERAL (SELECT CASE WHEN g %% 5 = 0 THEN now() - (g %% 1800) * interval '1 second'
                               ELSE now() - interval '5 days' + (g %% 86400) * interval '1 second' END
                    AS last_seen) AS seen
JOIN pairs p ON p.n = g %% (SELECT count(*) FROM pairs)
"""

_TOKENS_SQL = """
WITH pairs AS (
    SELECT row_number() OVER (ORDER BY id) - 1 AS n, user_id, tenant_id FROM accounts_membership
), app AS (SELECT min(id) AS id FROM oauth2_provider_application)
INSERT INTO oauth_accesstoken (token, token_checksum, expires, scope, resource, created, updated,
    tenant_id, user_id, application_id)
SELECT %(seed)s || '-' || g, encode(sha256((%(seed)s || '-' || g)::bytea), 'hex'),
    now() - interval '1 day' + (g %% 7200) * interval '1 second', 'mcp:read mcp:write',
    '["http://127.0.0.1/mcp"]'::jsonb, now() - interval '2 days', now() - interval '2 days',
    p.tenant_id, p.user_id, app.id
FROM generate_series(1, %(rows)s) AS g
CROSS JOIN app
JOIN pairs p ON p.n = g %% (SELECT count(*) FROM pairs)
"""

_AUDIT_SQL = """
WITH people AS (
    SELECT row_number() OVER (ORDER BY m.id) - 1 AS n, m.user_id, m.tenant_id, u.username
    FROM accounts_membership m JOIN accounts_user u ON u.id = m.user_id
), app AS (SELECT min(id) AS id, min(client_id) AS client_id FROM oauth2_provider_application)
INSERT INTO mcp_gateway_auditevent (created, action, outcome, tenant_id, user_id, username,
    application_id, client_id, session_id, request_id, ip, target, duration_ms, detail, event_id)
SELECT now() - g * interval '25 seconds',
    CASE WHEN g %% 50 = 0 THEN 'session.created' WHEN g %% 97 = 0 THEN 'permission.denied'
         ELSE 'tool.called' END,
    CASE WHEN g %% 97 = 0 THEN 'denied' ELSE 'ok' END,
    p.tenant_id, p.user_id, p.username, app.id, app.client_id,
    'seed-' || md5((g %% %(sessions)s)::text), %(seed)s, '127.0.0.1'::inet, 'test_simple_text',
    (g %% 100) / 10.0, '{"method": "tools/call", "arguments": {}}'::jsonb, gen_random_uuid()
FROM generate_series(1, %(rows)s) AS g
CROSS JOIN app
JOIN people p ON p.n = g %% (SELECT count(*) FROM people)
"""


def large_db_seed(database_url: str) -> None:
    """Seed what is missing (the sessions always, their ages being relative to now) and refresh
    the planner's statistics. Prints what it did and how long it took."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        started = time.monotonic()
        conn.execute("DELETE FROM mcp_gateway_mcpsession WHERE client_name = %s", [SEED])
        conn.execute(_SESSIONS_SQL, {"seed": SEED, "rows": SESSIONS})
        tokens = _count(conn, "SELECT count(*) FROM oauth_accesstoken WHERE token LIKE %s", [SEED + "-%"])
        if tokens < TOKENS:
            conn.execute("DELETE FROM oauth_accesstoken WHERE token LIKE %s", [SEED + "-%"])
            conn.execute(_TOKENS_SQL, {"seed": SEED, "rows": TOKENS})
        audit = _count(conn, "SELECT count(*) FROM mcp_gateway_auditevent WHERE request_id = %s", [SEED])
        if audit < AUDIT_ROWS:
            conn.execute("DELETE FROM mcp_gateway_auditevent WHERE request_id = %s", [SEED])
            conn.execute(_AUDIT_SQL, {"seed": SEED, "rows": AUDIT_ROWS, "sessions": SESSIONS})
        conn.execute("VACUUM ANALYZE mcp_gateway_mcpsession, oauth_accesstoken, mcp_gateway_auditevent")
        print(
            f"large database: {SESSIONS:,} sessions seeded, {TOKENS:,} tokens and {AUDIT_ROWS:,} audit "
            f"rows {'kept' if audit >= AUDIT_ROWS else 'seeded'} ({time.monotonic() - started:.0f} s)",
            flush=True,
        )


def _count(conn: psycopg.Connection, sql: str, params: list[str]) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0]) if row else 0
