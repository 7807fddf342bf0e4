"""Revoking tokens: for operators (admin actions and ``manage.py revoke_tokens``), for clients
(``/revoke/``, through the validator) and for reuse detection.

DOT's own revoke paths do the work, so an operator's revocation is what the ``/revoke/`` endpoint
does: revoking an access token also revokes its refresh token (else the client would just
refresh), and revoking a refresh token ends its whole token family (every refresh token rotated
from the same grant, and every access token issued from them; RFC 7009 section 2.1), keeping the
refresh tokens as revoked tombstones for reuse detection. A replayed authorization code ends the
family its first exchange issued (``oauth.code_replay``). Every token that stops working is
audited.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from django.db import transaction
from django.db.models import Q
from oauth2_provider.models import revoke_access_token

from accounts.models import Tenant, User
from core.audit.trail import audit_record
from core.models import AuditAction
from oauth.models import AccessToken, RefreshToken

BY_OPERATOR = "operator"
BY_OPERATOR_COMMAND = "operator-command"
BY_PASSWORD_RESET = "password-reset"
BY_CLIENT = "client"
# A rotated refresh token presented again after the grace window: someone holds a copy.
BY_REUSE_DETECTION = "refresh-token-reuse"
# An authorization code presented again after its exchange (RFC 6749 4.1.2; oauth.code_replay).
BY_CODE_REPLAY = "authorization-code-replay"


@dataclass(frozen=True, slots=True)
class RevokedCounts:
    access: int = 0
    refresh: int = 0

    def __add__(self, other: RevokedCounts) -> RevokedCounts:
        return RevokedCounts(access=self.access + other.access, refresh=self.refresh + other.refresh)


def token_revoked_audit(
    *, token: AccessToken | RefreshToken, kind: Literal["access", "refresh"], by: str, operator: str = ""
) -> None:
    """One ``token.revoked`` event for a token that stopped working."""
    detail: dict[str, str] = {"by": by, "kind": kind}
    if operator:
        detail["operator"] = operator
    audit_record(
        action=AuditAction.TOKEN_REVOKED,
        user=token.user,
        tenant=token.tenant,
        application=token.application,
        # DOT's __str__ names the row ("AccessToken #12") and never the secret.
        target=str(token),
        detail=detail,
    )


@transaction.atomic
def access_token_revoke(*, token: AccessToken, by: str, operator: str = "") -> RevokedCounts:
    refresh = RefreshToken.objects.filter(access_token=token, revoked__isnull=True).first()
    if refresh is not None:
        # Only the pair: revoking one access token is narrower than revoking the grant.
        return _refresh_token_revoke_alone(token=refresh, by=by, operator=operator)
    if not AccessToken.objects.filter(pk=token.pk).exists():
        return RevokedCounts()
    token_revoked_audit(token=token, kind="access", by=by, operator=operator)
    revoke_access_token(token)
    return RevokedCounts(access=1)


@transaction.atomic
def refresh_token_revoke(*, token: RefreshToken, by: str, operator: str = "") -> RevokedCounts:
    """Revoke the grant the refresh token belongs to: its whole family, or the token and its
    access token when it has none (only hand-made rows: migration 0003 gave old ones a family)."""
    if token.token_family is not None:
        return token_family_revoke(family=token.token_family, by=by, operator=operator)
    return _refresh_token_revoke_alone(token=token, by=by, operator=operator)


def _refresh_token_revoke_alone(*, token: RefreshToken, by: str, operator: str) -> RevokedCounts:
    # Locked so that two operators (or an operator and a refreshing client) revoke it once.
    live = (
        RefreshToken.objects.select_for_update(of=("self",))
        .select_related(
            "user",
            "tenant",
            "application",
            "access_token__user",
            "access_token__tenant",
            "access_token__application",
        )
        .filter(pk=token.pk, revoked__isnull=True)
        .first()
    )
    if live is None:
        return RevokedCounts()
    bound = live.access_token
    token_revoked_audit(token=live, kind="refresh", by=by, operator=operator)
    if bound is not None:
        token_revoked_audit(token=bound, kind="access", by=by, operator=operator)
    live.revoke()
    return RevokedCounts(access=int(bound is not None), refresh=1)


@transaction.atomic
def token_family_revoke(*, family: uuid.UUID, by: str, operator: str = "") -> RevokedCounts:
    """End a grant: revoke every live refresh token of the family and delete every access token
    issued with or from one of them (each audited), as DOT's ``revoke_family`` does."""
    members = RefreshToken.objects.filter(token_family=family)
    # Locked in DOT's order (refresh tokens, then access tokens), so a rotation in the family
    # waits for us, or we for it, and neither deadlocks nor slips a new member past the audit.
    live_refresh = list(
        members.select_for_update(of=("self",))
        .select_related("user", "tenant", "application")
        .filter(revoked__isnull=True)
        .order_by("pk")
    )
    access_tokens = list(
        AccessToken.objects.select_related("user", "tenant", "application")
        .filter(Q(pk__in=members.values("access_token_id")) | Q(source_refresh_token__in=members))
        .order_by("pk")
    )
    for refresh in live_refresh:
        token_revoked_audit(token=refresh, kind="refresh", by=by, operator=operator)
    for access in access_tokens:
        token_revoked_audit(token=access, kind="access", by=by, operator=operator)
    RefreshToken.revoke_family(family)
    # revoke_family deletes the access tokens bound to members; one whose own refresh token is
    # gone (purged) is still reachable through source_refresh_token, and goes too.
    AccessToken.objects.filter(pk__in=[access.pk for access in access_tokens]).delete()
    return RevokedCounts(access=len(access_tokens), refresh=len(live_refresh))


@transaction.atomic
def tokens_revoke_for_user(
    *, user: User, tenant: Tenant | None = None, by: str, operator: str = ""
) -> RevokedCounts:
    """Revoke every live token the user holds (in one tenant, or in all of them)."""
    refresh_tokens = RefreshToken.objects.filter(user=user, revoked__isnull=True)
    access_tokens = AccessToken.objects.filter(user=user)
    if tenant is not None:
        refresh_tokens = refresh_tokens.filter(tenant=tenant)
        access_tokens = access_tokens.filter(tenant=tenant)
    counts = RevokedCounts()
    for refresh in refresh_tokens.select_related("user", "tenant", "application"):
        counts += refresh_token_revoke(token=refresh, by=by, operator=operator)
    # What is left has no live refresh token: the loop above deleted every bound access token.
    for access in access_tokens.select_related("user", "tenant", "application"):
        counts += access_token_revoke(token=access, by=by, operator=operator)
    return counts
