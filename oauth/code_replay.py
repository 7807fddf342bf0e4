"""Authorization codes exchanged once, remembered so that a second exchange revokes the first.

RFC 6749 section 4.1.2: a code used more than once is refused, and the tokens already issued with
it should be revoked, since one of the two users of the code is not the client it was meant for.
DOT deletes the grant when it is exchanged, so nothing would be left to recognise the code by. The
validator therefore records, in the transaction that deletes the grant, the code's checksum (never
the code) with the token family the exchange issued. A later exchange of the same code finds that
row and ends the family; the refresh rotation keeps the family, so every later pair goes too.

The rows are kept until the code would have expired plus ``USED_CODE_MARGIN`` (a code is refused
as expired after that anyway, and a thief replays within seconds), and purged as new ones are
written, so the table holds only the last few minutes of exchanges.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import Application

from accounts.models import Tenant, User
from core.audit.trail import audit_record
from core.models import AuditAction, AuditOutcome
from oauth.models import AccessToken, Grant, UsedAuthorizationCode
from oauth.services import BY_CODE_REPLAY, RevokedCounts, access_token_revoke, token_family_revoke

USED_CODE_MARGIN = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class IssuedTokens:
    """What one exchange of a code issued: its token family, else its lone access token."""

    family: uuid.UUID | None
    access_checksum: str


def used_code_find(*, code_checksum: str, application: Application) -> UsedAuthorizationCode | None:
    return (
        UsedAuthorizationCode.objects.select_related("user", "tenant", "application")
        .filter(code_checksum=code_checksum, application=application)
        .first()
    )


def used_codes_purge() -> int:
    deleted, _ = UsedAuthorizationCode.objects.filter(remember_until__lt=timezone.now()).delete()
    return deleted


def used_code_record(*, code_checksum: str, grant: Grant, issued: IssuedTokens) -> UsedAuthorizationCode:
    """Remember an exchanged code. Called with the grant locked, before it is deleted."""
    used_codes_purge()
    return UsedAuthorizationCode.objects.create(
        code_checksum=code_checksum,
        application=grant.application,
        user=grant.user,
        tenant=grant.tenant,
        token_family=issued.family,
        access_token_checksum=issued.access_checksum,
        remember_until=max(grant.expires, timezone.now()) + USED_CODE_MARGIN,
    )


def _issued_revoke(issued: IssuedTokens) -> RevokedCounts:
    if issued.family is not None:
        return token_family_revoke(family=issued.family, by=BY_CODE_REPLAY)
    counts = RevokedCounts()
    if issued.access_checksum:
        for token in AccessToken.objects.select_related("user", "tenant", "application").filter(
            token_checksum=issued.access_checksum
        ):
            counts += access_token_revoke(token=token, by=BY_CODE_REPLAY)
    return counts


def _replay_audit(
    *,
    user: User | None,
    application: Application,
    tenant: Tenant | None,
    counts: RevokedCounts,
    parallel: bool,
) -> None:
    detail: dict[str, object] = {"revoked_access": counts.access, "revoked_refresh": counts.refresh}
    if parallel:
        detail["parallel"] = True
    audit_record(
        action=AuditAction.CODE_REPLAYED,
        outcome=AuditOutcome.DENIED,
        user=user,
        tenant=tenant,
        application=application,
        detail=detail,
    )


@transaction.atomic
def code_replay_revoke(*, used: UsedAuthorizationCode) -> RevokedCounts:
    """A used code presented again: end what its exchange issued, and say so in the audit trail."""
    counts = _issued_revoke(
        IssuedTokens(family=used.token_family, access_checksum=used.access_token_checksum)
    )
    _replay_audit(
        user=used.user, application=used.application, tenant=used.tenant, counts=counts, parallel=False
    )
    return counts


@transaction.atomic
def code_replay_revoke_parallel(
    *, code_checksum: str, application: Application, user: User | None, issued: IssuedTokens
) -> RevokedCounts:
    """Two exchanges of one code at once: both passed validation and issued tokens, and the one
    that lost the race to delete the grant ends up here. Neither exchange's tokens may live."""
    counts = _issued_revoke(issued)
    used = used_code_find(code_checksum=code_checksum, application=application)
    if used is not None:
        counts += _issued_revoke(
            IssuedTokens(family=used.token_family, access_checksum=used.access_token_checksum)
        )
    _replay_audit(
        user=user,
        application=application,
        tenant=used.tenant if used is not None else None,
        counts=counts,
        parallel=True,
    )
    return counts
