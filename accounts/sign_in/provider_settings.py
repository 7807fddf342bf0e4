"""A tenant's admins change their identity provider's settings (the tenant console).

What they change: how Gatehouse reaches the provider (name, issuer, client id, client secret), how
its people's roles are mapped (role claim, role map, default role), and whether sign-in through it
is on and required. The email domains and identity assertions stay the operators' (the admin).

Two rules keep a change from doing harm:

- OpenID Connect names a person by issuer and subject together: a subject of another issuer is
  someone else. So a changed issuer forgets who each person was at the old one (the provider's
  ``ExternalIdentity`` rows); each is linked again at their next sign-in as at a first one
  (``people``), never reached through a subject the new issuer happens to reuse.
- The admin who makes the change can still sign in after it: turning sign-in through the provider
  on as required needs them to have signed in through it (at this issuer); turning it off, or
  changing the issuer, needs them to have a password or (for the issuer) to keep the provider
  optional. Otherwise the change is refused with what to do first.

Each change holds the provider's row and writes one audit row: who, which fields, from and to
(the role map's size rather than its text, and never the secret: only that it was replaced).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from accounts.invitations.services import tenant_lock_for_admin
from accounts.models import ExternalIdentity, IdentityProvider, Role, Tenant, User
from core.audit.trail import audit_record
from core.crypto import secret_encrypt
from core.errors import InvalidInput, NotFound
from core.models import AuditAction

NO_PROVIDER = "{tenant} has no identity provider: an operator adds one in the admin."
REQUIRED_NEEDS_YOU_LINKED = (
    "Sign in through {provider} yourself first (sign out, then use “Sign in with your organisation”): "
    "with sign-in through it required, your password would no longer let you in, and you have not "
    "signed in through it{at}."
)
OFF_NEEDS_PASSWORD = (
    "You sign in only through {provider}{at}: switching it off would lock you out. Ask another admin "
    "who has a Gatehouse password, or an operator, to do it."
)
DEFAULT_ROLE_UNKNOWN = "The default role must be admin, contributor, viewer or none."
AT_NEW_ISSUER = " at the new issuer (a new issuer forgets who everyone was at the old one)"
# The fields shown from and to in the audit row (short, and never secret).
_PLAIN = ("name", "issuer", "client_id", "role_claim", "default_role", "required", "enabled")


@dataclass(frozen=True)
class ProviderChange:
    """What was changed: the fields' names (``client_secret`` when one was stored), and how many
    people were unlinked because the issuer changed."""

    fields: list[str]
    unlinked: int


def identity_provider_get_for_tenant(*, tenant: Tenant) -> IdentityProvider | None:
    return IdentityProvider.objects.filter(tenant=tenant).first()


def identity_provider_update(
    *,
    by: User,
    tenant: Tenant,
    name: str,
    issuer: str,
    client_id: str,
    client_secret: str,
    role_claim: str,
    role_map: dict[str, str],
    default_role: str,
    required: bool,
    enabled: bool,
) -> ProviderChange:
    """Change ``tenant``'s provider as ``by``, one of its admins (checked values: ``forms``);
    ``client_secret`` blank keeps the stored one. The same values again change nothing."""
    if default_role and default_role not in Role.values:
        raise InvalidInput(DEFAULT_ROLE_UNKNOWN, data={"field": "default_role"})
    with transaction.atomic():
        tenant_lock_for_admin(by=by, tenant=tenant)
        provider = IdentityProvider.objects.select_for_update().filter(tenant=tenant).first()
        if provider is None:
            raise NotFound(NO_PROVIDER.format(tenant=tenant.name))
        wanted: dict[str, Any] = {
            "name": name,
            "issuer": issuer,
            "client_id": client_id,
            "role_claim": role_claim,
            "role_map": role_map,
            "default_role": default_role,
            "required": required,
            "enabled": enabled,
        }
        before = {field: getattr(provider, field) for field in wanted}
        fields = [field for field, value in wanted.items() if before[field] != value]
        issuer_changed = "issuer" in fields
        if {"issuer", "required", "enabled"} & set(fields):
            _lockout_check(
                by=by, provider=provider, issuer_changed=issuer_changed, required=required, enabled=enabled
            )
        for field in fields:
            setattr(provider, field, wanted[field])
        if client_secret:
            provider.client_secret_encrypted = secret_encrypt(plaintext=client_secret)
            fields.append("client_secret")
        if not fields:
            return ProviderChange(fields=[], unlinked=0)
        provider.save()
        unlinked = ExternalIdentity.objects.filter(provider=provider).delete()[0] if issuer_changed else 0
        audit_record(
            action=AuditAction.IDENTITY_PROVIDER_CHANGED,
            user=by,
            tenant=tenant,
            target=provider.name,
            detail={
                "provider": provider.pk,
                "fields": fields,
                "changes": {
                    field: {"from": before[field], "to": wanted[field]} for field in fields if field in _PLAIN
                },
                **(
                    {"role_map": {"from": len(before["role_map"]), "to": len(role_map)}}
                    if "role_map" in fields
                    else {}
                ),
                "unlinked": unlinked,
            },
        )
    return ProviderChange(fields=fields, unlinked=unlinked)


def _lockout_check(
    *, by: User, provider: IdentityProvider, issuer_changed: bool, required: bool, enabled: bool
) -> None:
    """Refuse a change after which ``by`` could not sign in (module docstring)."""
    linked = not issuer_changed and ExternalIdentity.objects.filter(user=by, provider=provider).exists()
    at = AT_NEW_ISSUER if issuer_changed else ""
    if enabled and required:
        if not linked:
            raise InvalidInput(
                REQUIRED_NEEDS_YOU_LINKED.format(provider=provider.name, at=at),
                data={"field": "issuer" if issuer_changed else "required"},
            )
        return
    if not by.has_usable_password() and not (enabled and linked):
        raise InvalidInput(
            OFF_NEEDS_PASSWORD.format(provider=provider.name, at=at), data={"field": "enabled"}
        )
