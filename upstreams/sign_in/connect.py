"""A tenant admin connects an upstream that signs in with OAuth: the console's Connect button.

``upstream_connect_start`` runs the SDK's flow for the upstream in a thread with its own event loop
(as the configuration test does, ``upstreams.check``): discovery, registration, then the SDK hands
the authorization URL to this module's browser, which gives it back to the view (the view sends the
admin there) and waits, up to ``ATTEMPT_SECONDS``, for what the authorization server redirects back
with. The redirect lands on the callback view, maybe on another worker: ``upstream_connect_deliver``
checks the attempt (by its state, which only the admin's browser saw; by who started it; by their
still being the tenant's admin) and writes the code, encrypted, on the grant's row, where the
waiting thread polls for it. The SDK then checks the state and ``iss`` itself, exchanges the code,
and the tokens are stored (``storage``); the connection is audited (``upstream.changed``).

One attempt per upstream at a time: another admin's attempt under way is a 409; the same admin's
(a double submit, a closed tab) is superseded by the new one, whose state alone is then accepted.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx2
from django.db import connection, transaction
from django.utils import timezone
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult

from accounts.models import Role, User
from accounts.selectors import membership_get
from core.audit.trail import audit_record
from core.crypto import secret_decrypt, secret_encrypt
from core.errors import (
    Conflict,
    GatehouseError,
    InvalidInput,
    NotFound,
    PermissionDenied,
    UpstreamUnavailable,
)
from core.models import AuditAction, AuditOutcome
from core.text_safety import text_is_storable
from upstreams.config import UpstreamConfig, config_from_row
from upstreams.egress import upstream_http_client
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.sign_in.models import AttemptOutcome, UpstreamGrant
from upstreams.sign_in.provider import Interactive, sign_in_client_metadata_url, upstream_sign_in

# How long an admin has to sign in at the upstream's authorization server.
ATTEMPT_SECONDS = 600
POLL_SECONDS = 0.5
# Beyond the upstream's connect timeout (its metadata, its registration): until the URL is known.
URL_WAIT_SECONDS = 20.0
# The longest callback parameter taken (a code or state longer than this is no one's).
MAX_PARAMETER = 2000
PROBE_PROTOCOL_VERSION = "2025-11-25"

NOT_SIGN_IN = "{name} does not sign in with OAuth: its authentication is {auth}."
UNDER_WAY = "{name} is being connected by {who}; try again once they are done (at most {seconds} s)."
UNKNOWN_ATTEMPT = "This sign-in is unknown, used or expired: connect the upstream again from the console."
ADMINS_ONLY = "Only the tenant's admins connect its upstreams."
NO_SIGN_IN_ASKED = "it did not ask Gatehouse to sign in (it needs no OAuth sign-in)"
NO_URL_IN_TIME = "its authorization server was not found in time"
SUPERSEDED = "another connect attempt replaced this one"
NO_ANSWER = "nobody signed in within {seconds} s"
REFUSED = "the authorization server refused: {error}"
UNDECRYPTABLE = "its stored secrets no longer decrypt: enter them again"


class ConnectFailed(Exception):
    """Why an attempt ended before the admin's browser could be sent anywhere."""


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def upstream_connect_start(*, upstream: Upstream, by: User) -> str:
    """Start connecting ``upstream`` for ``by`` (a tenant admin, checked by the caller); the URL of
    its authorization server to send their browser to."""
    if upstream.auth != AuthKind.OAUTH_CODE:
        raise InvalidInput(NOT_SIGN_IN.format(name=upstream.name, auth=upstream.get_auth_display()))
    try:
        config = config_from_row(upstream)
    except ValueError:
        raise InvalidInput(UNDECRYPTABLE) from None
    attempt_id = secrets.token_hex(16)
    now = timezone.now()
    with transaction.atomic():
        grant, _ = UpstreamGrant.objects.select_for_update().get_or_create(upstream=upstream)
        active = grant.attempt_outcome in (AttemptOutcome.PENDING, AttemptOutcome.DELIVERED) and (
            grant.attempt_expires is not None and grant.attempt_expires > now
        )
        if active and grant.attempt_by_id != by.pk:
            assert grant.attempt_expires is not None
            left = max(1, int((grant.attempt_expires - now).total_seconds()))
            who = grant.attempt_by.username if grant.attempt_by else "another admin"
            raise Conflict(
                UNDER_WAY.format(name=upstream.name, who=who, seconds=left), retry_after_seconds=left
            )
        grant.attempt_id = attempt_id
        grant.attempt_by = by
        grant.attempt_expires = now + timedelta(seconds=ATTEMPT_SECONDS)
        grant.attempt_state_hash = ""
        grant.attempt_delivery_encrypted = ""
        grant.attempt_outcome = AttemptOutcome.PENDING
        grant.attempt_error = ""
        grant.save()
    url_ready: Future[str] = Future()
    threading.Thread(
        target=lambda: asyncio.run(_connect(config, grant.pk, attempt_id, url_ready)),
        name="upstream-connect",
        daemon=True,
    ).start()
    try:
        return url_ready.result(timeout=config.connect_timeout + URL_WAIT_SECONDS)
    except FutureTimeout:
        raise UpstreamUnavailable(upstream=upstream.name, reason=NO_URL_IN_TIME) from None
    except ConnectFailed as error:
        raise UpstreamUnavailable(upstream=upstream.name, reason=str(error)) from None


def upstream_connect_deliver(
    *, user: User, state: str, code: str, iss: str | None, error: str | None
) -> UpstreamGrant:
    """What the authorization server sent the admin's browser back with, for the attempt whose
    state it is: ``NotFound`` for any state not of a pending attempt of this person's."""
    values = [state, code, iss or "", error or ""]
    if not state or any(len(value) > MAX_PARAMETER or not text_is_storable(value) for value in values):
        raise NotFound(UNKNOWN_ATTEMPT)
    digest = _digest(state)
    with transaction.atomic():
        grant = (
            UpstreamGrant.objects.select_for_update(of=("self",))
            .select_related("upstream__tenant")
            .filter(attempt_state_hash=digest, attempt_outcome=AttemptOutcome.PENDING)
            .first()
        )
        if (
            grant is None
            or not hmac.compare_digest(grant.attempt_state_hash, digest)
            or grant.attempt_expires is None
            or grant.attempt_expires <= timezone.now()
            or grant.attempt_by_id != user.pk
        ):
            raise NotFound(UNKNOWN_ATTEMPT)
        membership = membership_get(user=user, tenant=grant.upstream.tenant)
        if membership is None or membership.role != Role.ADMIN:
            raise PermissionDenied(ADMINS_ONLY)
        delivery = {"code": code, "state": state, "iss": iss, "error": error}
        grant.attempt_delivery_encrypted = secret_encrypt(plaintext=json.dumps(delivery))
        grant.attempt_outcome = AttemptOutcome.DELIVERED
        # One use: the same redirect twice finds nothing.
        grant.attempt_state_hash = ""
        grant.save()
    return grant


def upstream_connect_wait(*, grant: UpstreamGrant, seconds: float) -> UpstreamGrant:
    """The grant once its attempt has ended (connected or failed), or as it is after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        grant.refresh_from_db()
        if grant.attempt_outcome in (AttemptOutcome.CONNECTED, AttemptOutcome.FAILED):
            return grant
        if time.monotonic() >= deadline:
            return grant
        time.sleep(POLL_SECONDS / 2)


class _AdminBrowser:
    """The SDK's browser for one attempt: hands the URL to the waiting view, then waits for the
    callback's delivery on the grant's row."""

    def __init__(self, grant_id: int, attempt_id: str, url_ready: Future[str]) -> None:
        self.grant_id = grant_id
        self.attempt_id = attempt_id
        self.url_ready = url_ready
        self.sent = False

    async def authorize(self, authorization_url: str) -> AuthorizationCodeResult:
        states = parse_qs(urlsplit(authorization_url).query).get("state") or [""]
        recorded = await UpstreamGrant.objects.filter(
            pk=self.grant_id, attempt_id=self.attempt_id, attempt_outcome=AttemptOutcome.PENDING
        ).aupdate(attempt_state_hash=_digest(states[0]))
        if not recorded:
            raise OAuthFlowError(SUPERSEDED)
        self.sent = True
        if not self.url_ready.done():
            self.url_ready.set_result(authorization_url)
        deadline = time.monotonic() + ATTEMPT_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            row = await UpstreamGrant.objects.filter(pk=self.grant_id).afirst()
            if row is None or row.attempt_id != self.attempt_id:
                raise OAuthFlowError(SUPERSEDED)
            if row.attempt_outcome == AttemptOutcome.DELIVERED:
                delivered = json.loads(secret_decrypt(token=row.attempt_delivery_encrypted))
                if delivered.get("error"):
                    raise OAuthFlowError(REFUSED.format(error=str(delivered["error"])[:200]))
                return AuthorizationCodeResult(
                    code=delivered["code"], state=delivered.get("state"), iss=delivered.get("iss")
                )
        raise OAuthFlowError(NO_ANSWER.format(seconds=ATTEMPT_SECONDS))


async def _connect(config: UpstreamConfig, grant_id: int, attempt_id: str, url_ready: Future[str]) -> None:
    browser = _AdminBrowser(grant_id, attempt_id, url_ready)
    interactive = Interactive(authorize=browser.authorize, client_metadata_url=sign_in_client_metadata_url())
    try:
        provider = await upstream_sign_in(config, interactive=interactive, fresh=True)
        status = await _probe(config, provider)
        if not browser.sent:
            raise ConnectFailed(NO_SIGN_IN_ASKED)
        if status >= 400:
            raise ConnectFailed(f"it answered HTTP {status} once signed in")
    except (Exception, BaseExceptionGroup) as error:
        reason = _reason(error)
        await _end(grant_id, attempt_id, error=reason)
        if not url_ready.done():
            url_ready.set_exception(ConnectFailed(reason))
        return
    await _end(grant_id, attempt_id, error=None)


async def _probe(config: UpstreamConfig, provider: httpx2.Auth) -> int:
    """One request the upstream must authorize: its 401 starts the SDK's flow, and the status of
    the same request, retried with the token, says whether the sign-in works."""
    headers = {"MCP-Protocol-Version": PROBE_PROTOCOL_VERSION}
    timeout = httpx2.Timeout(config.connect_timeout, read=ATTEMPT_SECONDS + config.connect_timeout)
    async with upstream_http_client(timeout=timeout, auth=provider) as http:
        if config.transport == Transport.SSE:
            async with http.stream(
                "GET", config.url, headers={**headers, "Accept": "text/event-stream"}
            ) as sse:
                return sse.status_code
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROBE_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "gatehouse", "version": "1"},
            },
        }
        response = await http.post(
            config.url, json=body, headers={**headers, "Accept": "application/json, text/event-stream"}
        )
        return response.status_code


def _reason(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, GatehouseError):
        return error.message
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:299] + "…"


async def _end(grant_id: int, attempt_id: str, *, error: str | None) -> None:
    await asyncio.to_thread(_ended, grant_id, attempt_id, error)


def _ended(grant_id: int, attempt_id: str, error: str | None) -> None:
    try:
        with transaction.atomic():
            grant = (
                UpstreamGrant.objects.select_for_update(of=("self",))
                .select_related("upstream__tenant", "attempt_by")
                .filter(pk=grant_id, attempt_id=attempt_id)
                .first()
            )
            if grant is None:
                return
            grant.attempt_state_hash = ""
            grant.attempt_delivery_encrypted = ""
            if error is None:
                grant.attempt_outcome = AttemptOutcome.CONNECTED
                grant.connected_by = grant.attempt_by
                grant.connected_at = timezone.now()
            else:
                grant.attempt_outcome = AttemptOutcome.FAILED
                grant.attempt_error = error[:500]
            grant.save()
            audit_record(
                action=AuditAction.UPSTREAM_CHANGED,
                outcome=AuditOutcome.OK if error is None else AuditOutcome.ERROR,
                user=grant.attempt_by,
                tenant=grant.upstream.tenant,
                target=grant.upstream.name,
                detail={
                    "change": "connected" if error is None else "connect failed",
                    "upstream_id": grant.upstream_id,
                    "scope": grant.scope,
                    **({"error": error[:300]} if error else {}),
                },
            )
    finally:
        # A thread of the loop's default executor: its connection is not a request's to close.
        connection.close()
