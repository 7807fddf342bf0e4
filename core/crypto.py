"""Encryption of stored credentials (data source URLs, language model API keys) with Fernet.

The key is ``DATA_SOURCE_ENCRYPTION_KEY`` (a Fernet key: 32 url-safe base64 bytes). Without it, a
key is derived from ``SECRET_KEY`` with HKDF, so development needs no extra setting; production
should set its own, so rotating ``SECRET_KEY`` does not make stored URLs unreadable.

Known limit: there is no key rotation yet. Changing the key makes existing URLs undecryptable;
they must be entered again in the admin. (``MultiFernet`` would allow rotation later.)
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from core.conf import gatehouse_settings

HKDF_INFO = b"gatehouse data source url encryption"
UNDECRYPTABLE = "The stored secret cannot be decrypted with the current key; enter it again in the admin."


def key_derive(*, info: bytes, length: int = 32) -> bytes:
    """A key of its own for one purpose (``info``), derived from ``SECRET_KEY`` with HKDF: every
    worker derives the same one, and no purpose's key says anything of another's."""
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(
        settings.SECRET_KEY.encode()
    )


def encryption_key() -> str:
    """The Fernet key in force: the configured one, or the one derived from SECRET_KEY."""
    configured = gatehouse_settings.DATA_SOURCE_ENCRYPTION_KEY
    if configured:
        return configured
    return base64.urlsafe_b64encode(key_derive(info=HKDF_INFO)).decode()


def _fernet() -> Fernet:
    return Fernet(encryption_key())


def secret_encrypt(*, plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def secret_decrypt(*, token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError(UNDECRYPTABLE) from exc
