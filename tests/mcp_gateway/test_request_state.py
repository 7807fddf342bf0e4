"""The sealing of protocol 2026-07-28's requestState: one key for every worker, bound to the caller."""

from __future__ import annotations

from types import SimpleNamespace

from mcp.server.request_state import AESGCMRequestStateCodec

from core.identity import Identity
from mcp_gateway.kernel.request_state import _principal, request_state_security
from mcp_gateway.kernel.scope_keys import IDENTITY_KEY
from tests.support.factories import IdentityFactory


def _context(identity: Identity | None) -> SimpleNamespace:
    scope = {IDENTITY_KEY: identity} if identity is not None else {}
    return SimpleNamespace(request=SimpleNamespace(scope=scope))


def _identity(user_id: int, tenant_id: int, client_id: str) -> Identity:
    return IdentityFactory.build(user_id=user_id, tenant_id=tenant_id, client_id=client_id)


def test_state_sealed_by_one_worker_opens_on_another():
    sealed = request_state_security().codec.seal(b'{"questions": []}')
    assert request_state_security().codec.unseal(sealed) == b'{"questions": []}'
    assert isinstance(request_state_security().codec, AESGCMRequestStateCodec)


def test_state_is_bound_to_user_tenant_and_client():
    assert _principal(_context(_identity(1, 2, "abc"))) == "1:2:abc"  # type: ignore[arg-type]
    assert _principal(_context(_identity(1, 3, "abc"))) != _principal(_context(_identity(1, 2, "abc")))  # type: ignore[arg-type]
    assert _principal(_context(None)) is None  # type: ignore[arg-type]
