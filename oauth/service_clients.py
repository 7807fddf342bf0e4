"""Service clients: a tenant's server-side applications, which take REST API tokens with the
client-credentials grant (``oauth.validators``) and act as an account of their own.

The account is a real user with no usable password, a member of the tenant with the client's role,
so everything downstream of a token (the hot path in ``mcp_gateway.transport.bearer``, rate limits, budgets,
audit) treats a service client as it treats a person, and removing the membership or deactivating
the account or tenant stops it at once. Operators create them with ``manage.py service_client`` or
the admin, tenant admins in their console (``portal.console.clients``); all three come through here.
"""

from __future__ import annotations

import secrets

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from oauth2_provider.generators import generate_client_secret
from oauth2_provider.models import Application

from accounts.models import Membership, Role, Tenant, User
from core.audit.trail import audit_record
from core.errors import InvalidInput, NotFound
from core.models import AuditAction
from core.text_safety import text_invisible_character, text_is_storable, text_unstorable_reason
from oauth.models import ServiceClient
from oauth.services import tokens_revoke_for_user

NAME_MAX_LENGTH = 100
REGISTRATION_SOURCE = "service_client"
BY_SERVICE_CLIENT_DELETE = "service-client-deleted"
NAME_REQUIRED = "The service client needs a name."
NAME_TOO_LONG = f"The name is longer than {NAME_MAX_LENGTH} characters."
NAME_INVISIBLE = "The name contains an invisible or control character ({code}). Type it again."
ROLE_UNKNOWN = "The role must be one of: " + ", ".join(Role.values) + "."
SERVICE_CLIENT_NOT_FOUND = "No such service client."


def service_client_name_clean(*, name: object) -> str:
    """The name as it will be stored, or InvalidInput saying what is wrong with it."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(NAME_REQUIRED, data={"field": "name"})
    name = name.strip()
    reason = text_unstorable_reason(name)
    if reason is not None:
        raise InvalidInput(f"The name {reason}.", data={"field": "name"})
    # A bidi override or zero-width character would make the name read as another one in every list.
    code = text_invisible_character(name)
    if code is not None:
        raise InvalidInput(NAME_INVISIBLE.format(code=code), data={"field": "name"})
    if len(name) > NAME_MAX_LENGTH:
        raise InvalidInput(NAME_TOO_LONG, data={"field": "name"})
    return name


def service_client_role_clean(*, role: object) -> Role:
    if not isinstance(role, str) or role not in Role.values:
        raise InvalidInput(ROLE_UNKNOWN, data={"field": "role"})
    return Role(role)


def _account_username(tenant: Tenant) -> str:
    # Unique by its random part; the slug only helps a person reading the user list.
    return f"svc-{tenant.slug[:40]}-{secrets.token_hex(4)}"


@transaction.atomic
def service_client_create(
    *, tenant: Tenant, name: str, role: str, created_by: User | None = None
) -> tuple[ServiceClient, str]:
    """A new service client for ``tenant`` and its plain client secret, which is shown once and
    stored only hashed (DOT hashes it on save)."""
    name = service_client_name_clean(name=name)
    checked_role = service_client_role_clean(role=role)
    account = User(username=_account_username(tenant), display_name=name)
    account.set_unusable_password()
    account.save()
    Membership.objects.create(user=account, tenant=tenant, role=checked_role)
    secret = generate_client_secret()
    application = Application.objects.create(
        name=name,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=secret,
        hash_client_secret=True,
        redirect_uris="",
        registration_source=Application.RegistrationSource.MANUAL,
    )
    service_client = ServiceClient.objects.create(
        application=application, tenant=tenant, account=account, created_by=created_by
    )
    audit_record(
        action=AuditAction.CLIENT_REGISTERED,
        user=created_by,
        tenant=tenant,
        application=application,
        target=name,
        detail={
            "registration_source": REGISTRATION_SOURCE,
            "role": checked_role.value,
            "account": account.username,
        },
    )
    return service_client, secret


@transaction.atomic
def service_client_delete(*, service_client: ServiceClient, by: User | None = None) -> None:
    """Revoke the client's tokens and delete it with its account (the membership goes with it)."""
    application = service_client.application
    account = service_client.account
    tokens_revoke_for_user(user=account, by=BY_SERVICE_CLIENT_DELETE, operator=by.username if by else "")
    # Written before the delete, which empties the row's link; the client id stays as text.
    audit_record(
        action=AuditAction.CLIENT_DELETED,
        user=by,
        tenant=service_client.tenant,
        application=application,
        target=application.name,
        detail={
            "client_id": application.client_id,
            "registration_source": REGISTRATION_SOURCE,
            "account": account.username,
        },
    )
    application.delete()
    account.delete()


def service_client_list(*, tenant: Tenant | None = None) -> QuerySet[ServiceClient]:
    """Service clients of ``tenant`` (of every tenant when None, for operators), with their role."""
    rows = ServiceClient.objects.select_related("application", "tenant", "account", "created_by")
    if tenant is not None:
        rows = rows.filter(tenant=tenant)
    return rows


def service_client_list_with_roles(*, tenant: Tenant) -> QuerySet[ServiceClient]:
    """``tenant``'s service clients by name, each with ``role_now``: the role its account holds in the
    tenant now ("" once the membership is gone), read in the same query as the rows."""
    role = Membership.objects.filter(user_id=OuterRef("account_id"), tenant_id=OuterRef("tenant_id")).values(
        "role"
    )[:1]
    return (
        service_client_list(tenant=tenant)
        .annotate(role_now=Subquery(role))
        .order_by("application__name", "pk")
    )


def service_client_role(*, service_client: ServiceClient) -> str:
    """The role its account holds in its tenant now, or "" once the membership is gone."""
    role = (
        Membership.objects.filter(user_id=service_client.account_id, tenant_id=service_client.tenant_id)
        .values_list("role", flat=True)
        .first()
    )
    return role or ""


def service_client_get(*, client_id: str, tenants: QuerySet[Tenant] | None = None) -> ServiceClient:
    """The service client with this client id, within ``tenants`` when given; NotFound otherwise,
    so another tenant's client reads as absent, not forbidden."""
    # A NUL or lone surrogate cannot be stored, so no such row exists; asking PostgreSQL would fail.
    if not isinstance(client_id, str) or not text_is_storable(client_id):
        raise NotFound(SERVICE_CLIENT_NOT_FOUND)
    rows = service_client_list().filter(application__client_id=client_id)
    if tenants is not None:
        rows = rows.filter(tenant__in=tenants)
    service_client = rows.first()
    if service_client is None:
        raise NotFound(SERVICE_CLIENT_NOT_FOUND)
    return service_client
