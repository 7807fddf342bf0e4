"""Service clients as operators make them: the services, ``manage.py service_client`` and the admin.
The token side (client credentials through real HTTP) is tests/e2e/oauth/test_client_credentials.py."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.hashers import check_password
from django.core.management import CommandError, call_command
from oauth2_provider.models import Application

from accounts.models import Membership, Role, User
from core.errors import InvalidInput, NotFound
from core.models import AuditAction, AuditEvent
from oauth.models import AccessToken, ServiceClient
from oauth.service_clients import (
    NAME_REQUIRED,
    NAME_TOO_LONG,
    ROLE_UNKNOWN,
    service_client_create,
    service_client_delete,
    service_client_get,
    service_client_list,
)
from tests.support.admin_support import admin_url
from tests.support.factories import AccessTokenFactory, TenantFactory

pytestmark = pytest.mark.django_db

HOSTILE_NAMES = {
    "blank": ("   ", NAME_REQUIRED),
    "nul": ("job\x00name", "NUL"),
    "surrogate": ("job\ud800name", "surrogate"),
    "overlong": ("x" * 101, NAME_TOO_LONG),
}


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match is not None, text[:2000]
    return match.group(1)


# The services


def test_a_service_client_is_a_confidential_client_credentials_app_with_an_account(tenant):
    service_client, secret = service_client_create(tenant=tenant, name=" Nightly report ", role="contributor")

    application = Application.objects.get(pk=service_client.application_id)
    assert application.name == "Nightly report"
    assert application.client_type == Application.CLIENT_CONFIDENTIAL
    assert application.authorization_grant_type == Application.GRANT_CLIENT_CREDENTIALS
    assert application.client_secret != secret
    assert check_password(secret, application.client_secret)
    account = User.objects.get(pk=service_client.account_id)
    assert re.fullmatch(rf"svc-{tenant.slug}-[0-9a-f]{{8}}", account.username)
    assert not account.has_usable_password()
    assert account.display_name == "Nightly report"
    assert Membership.objects.get(user=account).role == Role.CONTRIBUTOR
    assert Membership.objects.get(user=account).tenant == tenant


def test_creating_one_is_audited_without_the_secret(tenant, owner):
    service_client, secret = service_client_create(
        tenant=tenant, name="Backend", role="viewer", created_by=owner.user
    )

    event = AuditEvent.objects.get(action=AuditAction.CLIENT_REGISTERED)
    assert event.application_id == service_client.application_id
    assert event.tenant_id == tenant.pk
    assert event.user_id == owner.user_id
    assert event.detail["registration_source"] == "service_client"
    assert event.detail["role"] == "viewer"
    assert secret not in str(event.detail)


@pytest.mark.parametrize("case", HOSTILE_NAMES)
def test_a_hostile_name_is_refused_and_nothing_is_made(tenant, case):
    name, message = HOSTILE_NAMES[case]
    with pytest.raises(InvalidInput, match=message):
        service_client_create(tenant=tenant, name=name, role="contributor")
    assert not ServiceClient.objects.exists()
    assert not Application.objects.exists()


def test_a_name_of_exactly_the_limit_is_kept(tenant):
    service_client, _ = service_client_create(tenant=tenant, name="é" * 100, role="admin")
    assert service_client.application.name == "é" * 100


@pytest.mark.parametrize("role", ["owner", "", "Admin", "admin\x00"])
def test_an_unknown_role_is_refused(tenant, role):
    with pytest.raises(InvalidInput, match=re.escape(ROLE_UNKNOWN)):
        service_client_create(tenant=tenant, name="Backend", role=role)
    assert not User.objects.filter(username__startswith="svc-").exists()


def test_deleting_revokes_its_tokens_and_removes_application_and_account(tenant, owner):
    service_client, _ = service_client_create(tenant=tenant, name="Backend", role="contributor")
    membership = Membership.objects.get(user=service_client.account)
    token = AccessTokenFactory.create(membership=membership, application=service_client.application)

    service_client_delete(service_client=service_client, by=owner.user)

    assert not AccessToken.objects.filter(pk=token.pk).exists()
    assert not Application.objects.filter(pk=service_client.application_id).exists()
    assert not User.objects.filter(pk=service_client.account_id).exists()
    assert not ServiceClient.objects.exists()
    deleted = AuditEvent.objects.get(action=AuditAction.CLIENT_DELETED)
    assert deleted.detail["client_id"] == service_client.application.client_id
    assert deleted.user_id == owner.user_id
    assert AuditEvent.objects.filter(action=AuditAction.TOKEN_REVOKED).exists()


def test_the_list_is_per_tenant(tenant):
    other = TenantFactory.create()
    mine, _ = service_client_create(tenant=tenant, name="Mine", role="viewer")
    service_client_create(tenant=other, name="Theirs", role="viewer")

    assert list(service_client_list(tenant=tenant)) == [mine]
    assert service_client_list().count() == 2


@pytest.mark.parametrize("client_id", ["missing", "\x00", "\ud800", "x" * 10_000])
def test_an_unknown_or_hostile_client_id_is_not_found(client_id):
    with pytest.raises(NotFound):
        service_client_get(client_id=client_id)


def test_another_tenants_client_is_not_found_within_my_tenants(tenant):
    theirs, _ = service_client_create(tenant=TenantFactory.create(), name="Theirs", role="viewer")
    with pytest.raises(NotFound):
        service_client_get(
            client_id=theirs.application.client_id, tenants=type(tenant).objects.filter(pk=tenant.pk)
        )


# manage.py service_client


def test_the_command_creates_prints_the_secret_once_and_a_token_request(tenant, capsys):
    call_command("service_client", "create", tenant.slug, "Nightly report", "--role", "viewer")

    out = capsys.readouterr().out
    client_id = _found(r"client_id:\s+(\S+)", out)
    secret = _found(r"client_secret:\s+(\S+)", out)
    service_client = ServiceClient.objects.get(application__client_id=client_id)
    assert check_password(secret, service_client.application.client_secret)
    assert Membership.objects.get(user=service_client.account).role == Role.VIEWER
    # Shown failing before: the curl line carried the secret as an argument (docs/upstreams.md:
    # secrets never go on the command line).
    assert [line for line in out.splitlines() if secret in line] == [f"client_secret: {secret}"]
    curl = next(line.strip() for line in out.splitlines() if "| curl " in line)
    assert '"$CLIENT_SECRET"' in curl
    assert "grant_type=client_credentials" in curl
    assert "resource=http" in curl
    assert "/api" in curl
    assert "/oauth/token/" in curl


def test_the_command_defaults_to_contributor(tenant, capsys):
    call_command("service_client", "create", tenant.slug, "Backend")
    service_client = ServiceClient.objects.get()
    assert Membership.objects.get(user=service_client.account).role == Role.CONTRIBUTOR


def test_the_command_lists_and_deletes(tenant, capsys):
    service_client, _ = service_client_create(tenant=tenant, name="Backend", role="admin")
    call_command("service_client", "list", tenant.slug)
    listed = capsys.readouterr().out
    assert service_client.application.client_id in listed
    assert "admin" in listed

    call_command("service_client", "delete", service_client.application.client_id)

    assert "Deleted" in capsys.readouterr().out
    assert not ServiceClient.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create", "no-such-tenant", "Backend"], "No tenant"),
        (["create", "acme-test", "Backend", "--role", "owner"], "role must be one of"),
        (["create", "acme-test", "job\x00"], "NUL"),
        (["create", "acme-test", "job\udcff"], "surrogate"),
        (["create", "acme-test", "x" * 101], "longer than 100"),
        (["create", "acme\x00", "Backend"], "No tenant"),
        (["list", "no-such-tenant"], "No tenant"),
        (["delete", "no-such-client"], "No such service client"),
        (["delete", "\x00"], "No such service client"),
    ],
)
def test_the_command_refuses_bad_input_clearly(tenant, args, message):
    with pytest.raises(CommandError, match=message) as refused:
        call_command("service_client", *args)
    # manage.py exits with this status, after printing the message alone.
    assert refused.value.returncode == 1
    assert not ServiceClient.objects.exists()


# The admin


def test_the_admin_adds_one_and_shows_the_secret_once(client, operator, tenant):
    response = client.post(
        admin_url(ServiceClient, "add"),
        {"tenant": tenant.pk, "name": "Backend", "role": "viewer"},
        follow=True,
    )

    assert response.status_code == 200
    service_client = ServiceClient.objects.get()
    assert service_client.created_by == operator
    page = response.content.decode()
    secret = _found(r"client secret: (\S+) ", page)
    assert check_password(secret, service_client.application.client_secret)
    assert service_client.application.client_id in page
    # Shown once: the list and the object's page never show it again.
    again = client.get(admin_url(ServiceClient, "changelist")).content.decode()
    assert secret not in again
    assert service_client.application.client_id in again
    detail = client.get(admin_url(ServiceClient, "change", service_client.pk)).content.decode()
    assert secret not in detail
    assert 'name="client_id"' not in detail


ADMIN_HOSTILE_NAMES = {
    "blank": "   ",
    "nul": "job%00name",
    "overlong": "x" * 101,
    # What a browser can send for a lone surrogate: its (invalid) UTF-8 bytes, which Django decodes
    # to U+FFFD; stored as that, never a 500.
    "surrogate-bytes": "job%ED%A0%80name",
}


@pytest.mark.parametrize("case", ADMIN_HOSTILE_NAMES)
def test_the_admin_form_refuses_a_hostile_name(client, operator, tenant, case):
    body = f"tenant={tenant.pk}&role=viewer&name={ADMIN_HOSTILE_NAMES[case]}"
    response = client.post(
        admin_url(ServiceClient, "add"), body, content_type="application/x-www-form-urlencoded"
    )
    if case == "surrogate-bytes":
        assert response.status_code == 302
        assert ServiceClient.objects.get().application.name == "job\ufffd\ufffd\ufffdname"
        return
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    assert not ServiceClient.objects.exists()


@pytest.mark.parametrize(("field", "value"), [("role", "owner"), ("tenant", "999999"), ("tenant", "1\x00")])
def test_the_admin_form_refuses_a_bad_role_or_tenant(client, operator, tenant, field, value):
    data = {"tenant": tenant.pk, "name": "Backend", "role": "viewer", field: value}
    response = client.post(admin_url(ServiceClient, "add"), data)
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    assert not ServiceClient.objects.exists()


def test_the_admin_delete_goes_through_the_service(client, operator, tenant):
    service_client, _ = service_client_create(tenant=tenant, name="Backend", role="viewer")

    response = client.post(
        admin_url(ServiceClient, "delete", service_client.pk), {"post": "yes"}, follow=True
    )

    assert response.status_code == 200
    assert not ServiceClient.objects.exists()
    assert not User.objects.filter(pk=service_client.account_id).exists()
    assert AuditEvent.objects.filter(action=AuditAction.CLIENT_DELETED, user=operator).exists()


def test_the_admin_bulk_delete_goes_through_the_service(client, operator, tenant):
    made = [service_client_create(tenant=tenant, name=f"Job {n}", role="viewer")[0] for n in range(2)]

    client.post(
        admin_url(ServiceClient, "changelist"),
        {"action": "delete_selected", "_selected_action": [s.pk for s in made], "post": "yes"},
    )

    assert not ServiceClient.objects.exists()
    assert not User.objects.filter(pk__in=[s.account_id for s in made]).exists()
    assert AuditEvent.objects.filter(action=AuditAction.CLIENT_DELETED).count() == 2
