"""The SDK's ``TokenStorage`` for an upstream that signs in with OAuth, on its ``UpstreamGrant`` row:
tokens and a registered client stored encrypted, and read back by every session of the upstream
in every worker. The SDK keeps a token's lifetime relative (``expires_in``); the row keeps when it
expires, so a session opened later knows to refresh it before use rather than after a refusal.
"""

from __future__ import annotations

import json
import time
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.shared.auth_utils import calculate_token_expiry

from core.crypto import secret_decrypt, secret_encrypt
from upstreams.config import UpstreamConfig
from upstreams.sign_in.models import UpstreamGrant

PRE_REGISTERED_AUTH_METHOD = "client_secret_basic"


class GrantStorage:
    """One provider's view of the upstream's grant. ``fresh`` (a connect attempt) starts without the
    stored tokens, so a new sign-in happens even while the old tokens still work."""

    def __init__(self, *, config: UpstreamConfig, redirect_uri: str, fresh: bool = False) -> None:
        self._config = config
        self._redirect_uri = redirect_uri
        self._fresh = fresh
        self.expires_at: float | None = None

    @property
    def pre_registered(self) -> bool:
        return bool(self._config.oauth_client_id)

    async def _row(self) -> UpstreamGrant | None:
        return await UpstreamGrant.objects.filter(upstream_id=self._config.id).afirst()

    async def get_tokens(self) -> OAuthToken | None:
        if self._fresh:
            return None
        row = await self._row()
        if row is None or not row.tokens_encrypted:
            return None
        try:
            stored = json.loads(secret_decrypt(token=row.tokens_encrypted))
        except ValueError:
            # Encrypted with a key no longer configured: as good as no sign-in.
            return None
        self.expires_at = stored.get("expires_at")
        return OAuthToken.model_validate(stored["token"])

    def valid_now(self) -> bool:
        return self.expires_at is None or time.time() <= self.expires_at

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._fresh = False
        self.expires_at = calculate_token_expiry(tokens.expires_in)
        stored = {"token": tokens.model_dump(mode="json", exclude_none=True), "expires_at": self.expires_at}
        await UpstreamGrant.objects.aupdate_or_create(
            upstream_id=self._config.id,
            defaults={
                "tokens_encrypted": secret_encrypt(plaintext=json.dumps(stored)),
                "scope": (tokens.scope or "")[:1000],
            },
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.pre_registered:
            secret = self._config.oauth_client_secret or None
            return OAuthClientInformationFull(
                client_id=self._config.oauth_client_id,
                client_secret=secret,
                token_endpoint_auth_method=PRE_REGISTERED_AUTH_METHOD if secret else "none",
                redirect_uris=[self._redirect_uri],  # type: ignore[list-item]
            )
        row = await self._row()
        if row is None or not row.client_info_encrypted:
            return None
        try:
            loaded: dict[str, Any] = json.loads(secret_decrypt(token=row.client_info_encrypted))
        except ValueError:
            return None
        return OAuthClientInformationFull.model_validate(loaded)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.pre_registered:
            return
        plaintext = client_info.model_dump_json(exclude_none=True)
        await UpstreamGrant.objects.aupdate_or_create(
            upstream_id=self._config.id,
            defaults={"client_info_encrypted": secret_encrypt(plaintext=plaintext)},
        )
