"""SSE event ids of the standalone stream that say nothing about other tenants.

A stream's position is a change-log id, and the change log is one sequence for every tenant: sent
as it is, the difference between two ids a client sees counts every other tenant's toolset,
upstream and resource changes in between. So an id is the position sealed with the client's tenant
and four random bytes in one AES block under a key derived from ``SECRET_KEY``: every worker opens
what any worker sealed (a reconnection may reach another one), two ids of the same position differ,
and an id opens only for the tenant it was sealed for. Anything that does not open is a position
this server never sent, which the stream answers with "every list changed".

One block under AES is a keyed permutation of 16 bytes; nothing longer is encrypted, so ECB's
weakness (repeated blocks showing) has nothing to show.
"""

from __future__ import annotations

import base64
import binascii
import functools
import secrets
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from django.conf import settings

from core.crypto import key_derive

HKDF_INFO = b"gatehouse mcp stream event ids"
# Change id (8 bytes), tenant id (4), random (4): one AES block.
_LAYOUT = struct.Struct(">QII")
# 16 bytes in unpadded base64url.
SEALED_LENGTH = 22
_TENANT_MAX = 2**32 - 1


@functools.lru_cache(maxsize=2)
def _cipher(secret_key: str) -> Cipher[modes.ECB]:
    # The cache is keyed by the secret, so a test that changes it gets its own key.
    return Cipher(algorithms.AES(key_derive(info=HKDF_INFO, length=16)), modes.ECB())  # noqa: S305


def event_id_seal(*, tenant_id: int, change_id: int) -> str:
    """The id a client of ``tenant_id`` is sent for the log position ``change_id``."""
    block = _LAYOUT.pack(change_id, tenant_id & _TENANT_MAX, secrets.randbits(32))
    encryptor = _cipher(settings.SECRET_KEY).encryptor()
    sealed = encryptor.update(block) + encryptor.finalize()
    return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")


def event_id_open(*, tenant_id: int, value: str) -> int | None:
    """The position a ``Last-Event-ID`` stands for; None for anything not sealed for this tenant."""
    if len(value) != SEALED_LENGTH or not value.isascii():
        return None
    try:
        sealed = base64.urlsafe_b64decode(value + "==")
    except (binascii.Error, ValueError):
        return None
    if len(sealed) != _LAYOUT.size:
        return None
    decryptor = _cipher(settings.SECRET_KEY).decryptor()
    change_id, sealed_tenant, _ = _LAYOUT.unpack(decryptor.update(sealed) + decryptor.finalize())
    if sealed_tenant != tenant_id & _TENANT_MAX:
        return None
    return change_id
