"""Revoking tokens on an operator's behalf (admin actions and ``manage.py revoke_tokens``).

DOT's own revoke paths do the work, so an operator's revocation is exactly what the ``/revoke/``
endpoint does: revoking an access token also revokes its refresh token (else the client would
just refresh), and revoking a refresh token deletes its access token and keeps the refresh token
as a revoked tombstone for reuse detection. Every token that stops working is audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from django.db import transaction
from oauth2_provider.models import revoke_access_token

from accounts.models import Tenant, User
from mcp_gateway.audit import audit_record
from mcp_gateway.models import AuditAction
from oauth.models import AccessToken, RefreshToken

BY_OPERATOR = "operator"
BY_OPERATOR_COMMAND = "operator-command"


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
        return refresh_token_revoke(token=refresh, by=by, operator=operator)
    if not AccessToken.objects.filter(pk=token.pk).exists():
        return RevokedCounts()
    token_revoked_audit(token=token, kind="access", by=by, operator=operator)
    revoke_access_token(token)
    return RevokedCounts(access=1)


@transaction.atomic
def refresh_token_revoke(*, token: RefreshToken, by: str, operator: str = "") -> RevokedCounts:
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
