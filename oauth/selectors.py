"""Reads for the OAuth endpoints' audit: which client, which token (found by its checksum, the
only form in which a token is looked up, so no secret is ever compared or stored here)."""

from __future__ import annotations

import hashlib

from oauth2_provider.models import Application

from oauth.models import AccessToken, RefreshToken


def application_find(*, client_id: str | None) -> Application | None:
    if not client_id:
        return None
    return Application.objects.filter(client_id=client_id).first()


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def access_token_find(*, token: str) -> AccessToken | None:
    return (
        AccessToken.objects.select_related("user", "tenant", "application")
        .filter(token_checksum=_checksum(token))
        .first()
    )


def token_find_live(*, token: str, client_id: str) -> AccessToken | RefreshToken | None:
    """The live access or refresh token with this value that belongs to this client, as DOT's
    revocation finds it (RFC 7009: a client may only revoke its own tokens)."""
    lookup = {"token_checksum": _checksum(token), "application__client_id": client_id}
    access = AccessToken.objects.select_related("user", "tenant", "application").filter(**lookup).first()
    if access is not None:
        return access
    return (
        RefreshToken.objects.select_related("user", "tenant", "application")
        .filter(revoked__isnull=True, **lookup)
        .first()
    )


def token_is_live(*, token: AccessToken | RefreshToken) -> bool:
    if isinstance(token, AccessToken):
        return AccessToken.objects.filter(pk=token.pk).exists()
    return RefreshToken.objects.filter(pk=token.pk, revoked__isnull=True).exists()
