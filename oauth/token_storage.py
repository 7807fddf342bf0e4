"""How access and refresh tokens are kept at rest, and the refresh grace window.

Tokens are stored as DOT's ``COMPLIANT_BCP_RFC9700_TOKEN_STORAGE`` stores them: the ``token``
column stays blank and only ``token_checksum``, the SHA-256 of the token, is written. Every lookup
(DOT's validator, revocation and introspection, the MCP hot path, our audit selectors) goes
through that checksum, so a copy of the database holds nothing a client could present.

Authorization codes are kept the same way: DOT's ``Grant.code`` column holds the code's checksum,
and the validator hands DOT the checksum wherever it looks a grant up by code (``validators``);
exchanged codes are remembered by checksum too (``code_replay``).

A plain SHA-256 is enough, and a keyed one would buy nothing: oauthlib's tokens carry about 178
random bits, so there is no dictionary to run against the hashes; and DOT computes the same
checksum in every lookup it makes, which a key would force us to replace one by one.

DOT refuses (system check ``oauth2_provider.E001``) to combine hashed storage with its own refresh
grace period, because inside the window it answers a repeated refresh with the *previously issued*
pair, read back from the ``token`` column. Gatehouse keeps DOT's grace period at 0 and runs its own
window (``OAUTH_REFRESH_GRACE_SECONDS``): a rotated refresh token presented again inside it
gets a *fresh* pair in the same token family (``TenantOAuth2Validator``), so both of a client's
parallel refreshes end up holding working tokens, and nothing needs to be read back.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from django.utils import timezone

from core.conf import gatehouse_settings
from oauth.models import AccessToken, RefreshToken


def token_checksum(raw_token: str) -> str:
    """The only form in which a token is stored or looked up (DOT's ``token_checksum``)."""
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


def refresh_grace() -> timedelta:
    return timedelta(seconds=gatehouse_settings.OAUTH_REFRESH_GRACE_SECONDS)


def refresh_token_in_grace(*, token: RefreshToken, now: datetime | None = None) -> bool:
    """Whether a revoked refresh token may still be exchanged: it was rotated (not revoked on
    purpose) moments ago, so presenting it again is a parallel or retried refresh, not a replay.

    "Rotated" is what DOT checks too: the access token minted from it still exists. A token revoked
    through ``/revoke/``, by an operator or by reuse detection never minted one; one replayed
    from further down a rotated chain lost it when its successor was rotated in turn.
    """
    if token.revoked is None:
        return False
    if token.revoked <= (now or timezone.now()) - refresh_grace():
        return False
    return AccessToken.objects.filter(source_refresh_token=token).exists()
