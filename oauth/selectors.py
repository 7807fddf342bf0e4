"""Reads for the OAuth endpoints: which client, which token. A token is only ever found by its
checksum (``oauth.token_storage``), the one form in which it is stored, so no secret is compared
or kept here."""

from __future__ import annotations

from django.db.models import F
from oauth2_provider.models import Application

from oauth.models import AccessToken, RefreshToken
from oauth.token_storage import token_checksum


def application_find(*, client_id: str | None) -> Application | None:
    if not client_id:
        return None
    return Application.objects.filter(client_id=client_id).first()


def access_token_find(*, token: str) -> AccessToken | None:
    return (
        AccessToken.objects.select_related("user", "tenant", "application")
        .filter(token_checksum=token_checksum(token))
        .first()
    )


def refresh_token_find(*, token: str, application_id: int | None = None) -> RefreshToken | None:
    """The refresh token with this value: the live row if there is one, else the latest revoked.

    Several rows may share a checksum (DOT's uniqueness is ``(token_checksum, revoked)``); this is
    the order DOT's own validator reads them in.
    """
    rows = RefreshToken.objects.select_related("user", "tenant", "application", "access_token").filter(
        token_checksum=token_checksum(token)
    )
    if application_id is not None:
        rows = rows.filter(application_id=application_id)
    return rows.order_by(F("revoked").desc(nulls_first=True)).first()


def access_token_find_for_client(*, token: str, application_id: int) -> AccessToken | None:
    """The live access token with this value, if it belongs to this client (RFC 7009: a client
    may only revoke its own tokens)."""
    return (
        AccessToken.objects.select_related("user", "tenant", "application")
        .filter(token_checksum=token_checksum(token), application_id=application_id)
        .first()
    )
