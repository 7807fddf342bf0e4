"""Ending everything a person holds at once, for an operator who must cut them off now (a person
removed at their organisation's identity provider, a lost laptop): their OAuth tokens in every
tenant, their live MCP sessions, their signed-in browsers and, if asked, the account itself.

Browser sessions are found by reading each unexpired one: this runs rarely, by an operator, and
touches no other person's session."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from core.audit.trail import audit_record
from core.models import AuditAction
from oauth.services import BY_OPERATOR_COMMAND, tokens_revoke_for_user
from portal.connected import session_end_all_for_user


@dataclass(frozen=True)
class AccessEnded:
    access_tokens: int
    refresh_tokens: int
    mcp_sessions: int
    browser_sessions: int
    deactivated: bool


def person_access_end(*, user: User, deactivate: bool, by: str = BY_OPERATOR_COMMAND) -> AccessEnded:
    """End ``user``'s tokens, MCP sessions and browser sessions; with ``deactivate``, the account
    too (no sign-in of any kind until an operator turns it on again). Audited as one row."""
    with transaction.atomic():
        if deactivate and user.is_active:
            user.is_active = False
            user.save(update_fields=["is_active"])
        tokens = tokens_revoke_for_user(user=user, by=by)
        browsers = _browser_sessions_end(user)
        ended = AccessEnded(
            access_tokens=tokens.access,
            refresh_tokens=tokens.refresh,
            mcp_sessions=0,
            browser_sessions=browsers,
            deactivated=deactivate,
        )
    # Each MCP session's ending is its own audited change, after the tokens are gone.
    mcp = session_end_all_for_user(user=user)
    ended = AccessEnded(**{**ended.__dict__, "mcp_sessions": mcp})
    audit_record(action=AuditAction.ACCESS_ENDED, user=user, detail={"by": by, **ended.__dict__})
    return ended


def person_clients_disconnect(*, user: User, by: str) -> AccessEnded:
    """End ``user``'s OAuth tokens and live MCP sessions, leaving browser sessions to Django.

    For a password reset: whoever knew the old password may have connected a client with it, and
    a token outlives the password it was granted with. Django itself signs out every browser
    session signed in with the old password (their session hash no longer matches)."""
    tokens = tokens_revoke_for_user(user=user, by=by)
    mcp = session_end_all_for_user(user=user)
    return AccessEnded(
        access_tokens=tokens.access,
        refresh_tokens=tokens.refresh,
        mcp_sessions=mcp,
        browser_sessions=0,
        deactivated=False,
    )


def _browser_sessions_end(user: User) -> int:
    mine = [
        session.pk
        for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
        if str(session.get_decoded().get(SESSION_KEY, "")) == str(user.pk)
    ]
    Session.objects.filter(pk__in=mine).delete()
    return len(mine)
