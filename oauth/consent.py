"""Remembered consent: a person's yes to a client in a tenant, reused while nothing grows.

The consent page asks again when the client asks for more than was allowed there, when the
remembered tenant is no longer the person's, or when the person's choice of tenant would be a
guess (several remembered tenants fit). A role that shrinks needs no rule here: tokens only ever
carry what the role allows when they are used.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import transaction
from oauth2_provider.models import Application

from accounts.models import Membership, Tenant, User
from accounts.scopes import scopes_granted
from oauth.models import RememberedConsent


@dataclass(frozen=True, slots=True)
class ConsentMemory:
    """What the consent page decides with: a membership to apply silently, or the tenant to
    preselect on the page when the person has to choose."""

    apply: Membership | None
    preselect_tenant_id: int | None


def _scopes_text(scopes: Iterable[str]) -> str:
    return " ".join(sorted(set(scopes)))


def consent_list_for_client(*, user: User, application: Application) -> list[RememberedConsent]:
    """The person's remembered consents for this client, most recently confirmed first."""
    return list(RememberedConsent.objects.filter(user=user, application=application).order_by("-updated"))


def consent_decide(
    *,
    requested: Iterable[str],
    memberships: Sequence[Membership],
    remembered: Sequence[RememberedConsent],
) -> ConsentMemory:
    """Pure over its arguments (no query), so every rule is testable without a request.

    A remembered consent covers a request when, in its tenant (still one of the person's), the
    requested scopes the role allows are non-empty and all among those once allowed.
    """
    requested = list(requested)
    by_tenant = {membership.tenant_id: membership for membership in memberships}
    mine = [consent for consent in remembered if consent.tenant_id in by_tenant]
    covering = []
    for consent in mine:
        granted = scopes_granted(requested=requested, role=by_tenant[consent.tenant_id].role)
        if granted and set(granted) <= set(consent.scopes.split()):
            covering.append(consent)
    preselect = mine[0].tenant_id if mine else None
    # With one tenant there is nothing to choose; with several, only a single fitting memory
    # says which one the person meant. Two fitting memories would make the choice a guess.
    if len(covering) == 1:
        return ConsentMemory(apply=by_tenant[covering[0].tenant_id], preselect_tenant_id=preselect)
    return ConsentMemory(apply=None, preselect_tenant_id=preselect)


@transaction.atomic
def consent_remember(*, user: User, application: Application, tenant: Tenant, scopes: Iterable[str]) -> None:
    """Add what the person just allowed to what they allowed before for this client and tenant."""
    consent = (
        RememberedConsent.objects.select_for_update()
        .filter(user=user, application=application, tenant=tenant)
        .first()
    )
    if consent is None:
        # get_or_create: a parallel first consent for the same triple lands on the same row.
        consent, created = RememberedConsent.objects.get_or_create(
            user=user, application=application, tenant=tenant, defaults={"scopes": _scopes_text(scopes)}
        )
        if created:
            return
    consent.scopes = _scopes_text([*consent.scopes.split(), *scopes])
    consent.save(update_fields=["scopes", "updated"])


def consent_forget(*, user: User, application: Application, tenant: Tenant) -> bool:
    """Forget the person's consent for this client in this tenant. Returns whether there was one."""
    deleted, _ = RememberedConsent.objects.filter(user=user, application=application, tenant=tenant).delete()
    return deleted > 0
