"""A database made before the move to ``core`` (and of consent memory to ``oauth``) migrates to the
new layout and keeps every row.

The old database is the schema at the last migrations of the release before the move
(``OLD_LEAVES``): the same tables, the same content types and permissions, made by the same
migrations. Rows go in through the current models, whose tables kept their names. Then a plain
``migrate`` runs, as an upgrade would, and every row, content type and permission is checked.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.conf import settings

from core.db import psycopg_connect_kwargs
from tests.support.python_process import python_run

# Third-party apps, at their latest (the same on both releases), then the leaf migration of each
# app of ours on the release before the layout change.
THIRD_PARTY = ["contenttypes", "auth", "admin", "sessions", "oauth2_provider"]
OLD_LEAVES = [
    ("accounts", "0002_remembered_consent"),
    ("oauth", "0004_redirect_uri_patterns"),
    ("mcp_gateway", "0008_audit_client_deleted"),
    ("data_agent", "0002_agent_preferences"),
    ("language_models", "0001_initial"),
]

_OLD_SCHEMA_AND_SEED = """
import json
from django.core.management import call_command
from tests.core.test_layout_migration import OLD_LEAVES, THIRD_PARTY

for app in THIRD_PARTY:
    call_command("migrate", app, verbosity=0, interactive=False)
for app, migration in OLD_LEAVES:
    call_command("migrate", app, migration, verbosity=0, interactive=False)
from django.db.migrations.recorder import MigrationRecorder
applied = set(MigrationRecorder.Migration.objects.values_list("app", "name"))
assert ("core", "0001_initial") not in applied
assert ("oauth", "0005_remembered_consent_moves_here") not in applied
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from oauth2_provider.models import Application
from accounts.models import Membership, Tenant, User

# The moved models as they were on the old release (today's classes have columns added since).
old_apps = MigrationLoader(connection).project_state(OLD_LEAVES).apps
AuditEvent = old_apps.get_model("mcp_gateway", "AuditEvent")
RateLimitRule = old_apps.get_model("mcp_gateway", "RateLimitRule")
RememberedConsent = old_apps.get_model("accounts", "RememberedConsent")

tenant = Tenant.objects.create(slug="old-acme", name="Old Acme")
user = User.objects.create_user(username="old-alice", password="x-unused-x")
Membership.objects.create(user=user, tenant=tenant, role="admin")
app = Application.objects.create(
    name="Old client", client_type="public", authorization_grant_type="authorization-code",
    redirect_uris="http://127.0.0.1/cb",
)
for i in range(3):
    AuditEvent.objects.create(
        action="tool.called", outcome="ok", tenant_id=tenant.pk, user_id=user.pk, username="old-alice",
        application_id=app.pk, client_id=app.client_id, target=f"tool-{i}", detail={"n": i, "text": "é"},
    )
RateLimitRule.objects.create(scope="tool", target="whoami", tenant_id=tenant.pk, limit=3, period_seconds=60)
RateLimitRule.objects.create(scope="login", target="", tenant_id=None, limit=7, period_seconds=3600)
RememberedConsent.objects.create(
    user_id=user.pk, application_id=app.pk, tenant_id=tenant.pk, scopes="mcp:read"
)
operators = Group.objects.create(name="operators")
operators.permissions.add(
    Permission.objects.get(content_type__app_label="mcp_gateway", codename="view_auditevent"),
    Permission.objects.get(content_type__app_label="mcp_gateway", codename="change_ratelimitrule"),
    Permission.objects.get(content_type__app_label="accounts", codename="view_rememberedconsent"),
)
staff = User.objects.create_user(username="old-operator", password="x-unused-x", is_staff=True)
staff.groups.add(operators)
print(json.dumps({"client_id": app.client_id}))
"""

_MIGRATE_AND_READ = """
import json
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
call_command("makemigrations", check=True, dry_run=True, verbosity=0)
from django.contrib.contenttypes.models import ContentType
from accounts.models import User
from core.models import AuditEvent, RateLimitRule
from oauth.models import RememberedConsent

staff = User.objects.get(username="old-operator")
print(json.dumps({
    "audit": [
        [e.action, e.username, e.tenant.slug, e.client_id, e.target, e.detail]
        for e in AuditEvent.objects.filter(username="old-alice").order_by("target")
    ],
    "rules": sorted(
        [r.scope, r.target, r.tenant.slug if r.tenant else None, r.limit, r.period_seconds]
        for r in RateLimitRule.objects.all()
    ),
    "consents": [
        [c.user.username, c.tenant.slug, c.application.client_id, c.scopes]
        for c in RememberedConsent.objects.all()
    ],
    "content_types": sorted(
        [ct.app_label, ct.model]
        for ct in ContentType.objects.filter(model__in=["auditevent", "ratelimitrule", "rememberedconsent"])
    ),
    "perms": [
        staff.has_perm(p)
        for p in ("core.view_auditevent", "core.change_ratelimitrule", "oauth.view_rememberedconsent")
    ],
}))
"""


def _url_for(database: str) -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.fixture
def old_database() -> Iterator[str]:
    """A scratch database beside the test database, dropped afterwards."""
    name = f"{settings.DATABASES['default']['NAME']}_layout"
    admin = {**psycopg_connect_kwargs(), "dbname": "postgres"}
    with psycopg.connect(**admin) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(**admin) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _manage(database: str, *args: str) -> str:
    env = {**os.environ, "DATABASE_URL": _url_for(database), "SECRET_KEY": "layout-migration-test"}
    result = python_run(["manage.py", *args], env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_a_database_from_before_the_move_keeps_every_row(old_database):
    seeded = _manage(old_database, "shell", "-c", _OLD_SCHEMA_AND_SEED)
    client_id = json.loads(seeded.strip().splitlines()[-1])["client_id"]

    # What an upgrade runs: every migration still to apply, then the check that none is missing.
    after = json.loads(_manage(old_database, "shell", "-c", _MIGRATE_AND_READ).strip().splitlines()[-1])
    assert after["audit"] == [
        ["tool.called", "old-alice", "old-acme", client_id, f"tool-{i}", {"n": i, "text": "é"}]
        for i in range(3)
    ]
    assert after["rules"] == [["login", "", None, 7, 3600], ["tool", "whoami", "old-acme", 3, 60]]
    assert after["consents"] == [["old-alice", "old-acme", client_id, "mcp:read"]]
    # Renamed in place: no stale content type left under the old app, permissions still granted.
    assert after["content_types"] == [
        ["core", "auditevent"],
        ["core", "ratelimitrule"],
        ["oauth", "rememberedconsent"],
    ]
    assert after["perms"] == [True, True, True]
