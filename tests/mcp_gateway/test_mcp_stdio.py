"""Who a stdio session acts as, how it travels to the guard, and that stdout stays the client's.

The sessions themselves, over the SDK's stdio client, are in tests/e2e/mcp/test_mcp_stdio_process.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from accounts.scopes import scopes_for_role
from accounts.selectors import NO_TENANT, NO_USER
from core.audit.trail import audit_entry
from core.errors import AuthenticationFailed, NotFound, PermissionDenied
from core.models import AuditAction
from mcp_gateway.kernel.identity import identity_from_request, request_for_identity
from mcp_gateway.management.commands.mcp_stdio import REFUSED_EXIT_CODE
from mcp_gateway.transport.stdio import (
    NOT_MEMBER,
    SCOPES_NOT_HELD,
    STDIO_CLIENT_ID,
    STDIO_CLIENT_NAME,
    TENANT_INACTIVE,
    USER_INACTIVE,
    stdio_identity,
    stdio_identity_for_start,
)

BASE_DIR = Path(__file__).resolve().parents[2]
ENTRY_MODULE = BASE_DIR / "gatehouse_stdio.py"


def test_it_acts_with_the_members_role_scopes_and_no_oauth_client(owner):
    identity = stdio_identity(username="owner", tenant_slug="acme-test")

    assert (identity.user_id, identity.tenant_id, identity.role) == (owner.user_id, owner.tenant_id, "admin")
    assert identity.scopes == scopes_for_role(role="admin")
    assert (identity.client_id, identity.client_name) == (STDIO_CLIENT_ID, STDIO_CLIENT_NAME)
    assert (identity.application_id, identity.token_id) == (0, 0)


def test_narrowed_scopes_are_kept_to_what_the_role_holds(member):
    identity = stdio_identity(
        username="member", tenant_slug="acme-test", narrow_to=frozenset({"mcp:read", "x"})
    )

    assert identity.scopes == frozenset({"mcp:read"})


def test_it_refuses_at_start_scopes_the_role_does_not_hold(member):
    with pytest.raises(PermissionDenied) as refused:
        stdio_identity_for_start(
            username="member", tenant_slug="acme-test", narrow_to=frozenset({"mcp:read", "mcp:write"})
        )

    assert refused.value.message == SCOPES_NOT_HELD.format(role="viewer", scopes="mcp:write")


def test_it_refuses_an_unknown_user_and_an_unknown_tenant(owner):
    with pytest.raises(NotFound) as no_user:
        stdio_identity(username="nobody\x00", tenant_slug="acme-test")
    with pytest.raises(NotFound) as no_tenant:
        stdio_identity(username="owner", tenant_slug="nowhere\ud800")

    assert no_user.value.message == NO_USER.format(username="nobody\x00")
    assert no_tenant.value.message == NO_TENANT.format(slug="nowhere\ud800")


def test_it_refuses_a_person_of_another_tenant(owner, outsider):
    with pytest.raises(PermissionDenied) as refused:
        stdio_identity(username="outsider", tenant_slug="acme-test")

    assert refused.value.message == NOT_MEMBER.format(username="outsider", slug="acme-test")


def test_it_refuses_a_disabled_account_and_a_deactivated_tenant(owner):
    owner.user.is_active = False
    owner.user.save()
    with pytest.raises(AuthenticationFailed) as disabled:
        stdio_identity(username="owner", tenant_slug="acme-test")
    owner.user.is_active = True
    owner.user.save()
    owner.tenant.is_active = False
    owner.tenant.save()
    with pytest.raises(AuthenticationFailed) as deactivated:
        stdio_identity(username="owner", tenant_slug="acme-test")

    assert disabled.value.message == USER_INACTIVE.format(username="owner")
    assert deactivated.value.message == TENANT_INACTIVE.format(slug="acme-test")


def test_the_identity_reaches_the_guard_through_a_scoped_request(owner):
    identity = stdio_identity(username="owner", tenant_slug="acme-test")

    assert identity_from_request(request_for_identity(identity=identity)) is identity
    with pytest.raises(AuthenticationFailed):
        identity_from_request(request_for_identity(identity=None))


def test_its_audit_rows_point_at_no_oauth_application(owner):
    identity = stdio_identity(username="owner", tenant_slug="acme-test")

    entry = audit_entry(action=AuditAction.TOOL_CALLED, identity=identity, target="whoami")

    assert entry.application_id is None
    assert entry.client_id == STDIO_CLIENT_ID


def test_a_reserved_stdout_carries_only_what_is_written_to_the_wire():
    script = (
        "from core.stdio_wire import stdout_reserve\n"
        "wire = stdout_reserve()\n"
        "assert stdout_reserve() is wire\n"
        "print('stray')\n"
        "import os; os.write(1, b'raw stray\\n')\n"
        "wire.write(b'protocol\\n'); wire.flush()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=BASE_DIR, capture_output=True, timeout=60, check=True
    )

    assert result.stdout == b"protocol\n"
    assert b"stray" in result.stderr
    assert b"raw stray" in result.stderr


@pytest.mark.django_db
def test_the_console_script_finds_the_project_from_anywhere_and_refuses_on_stderr(tmp_path):
    db = connection.settings_dict
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER'] or 'postgres'}@{host}/{db['NAME']}",
        "SECRET_KEY": "test-only-secret",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("PYTHONPATH", None)
    # As the installed script runs it: the module loaded by path (the editable install's finder),
    # from another directory, with nothing of the checkout on sys.path.
    launcher = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('gatehouse_stdio', {str(ENTRY_MODULE)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "module.main()\n"
    )

    helped = subprocess.run(
        [sys.executable, "-c", launcher, "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    refused = subprocess.run(
        [sys.executable, "-c", launcher, "--user", "nobody", "--tenant", "nowhere"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )

    assert helped.returncode == 0, helped.stderr.decode()
    assert helped.stdout == b""
    assert b"--tenant" in helped.stderr
    assert refused.returncode == REFUSED_EXIT_CODE, refused.stderr.decode()
    assert refused.stdout == b""
    assert NO_USER.format(username="nobody").encode() in refused.stderr
