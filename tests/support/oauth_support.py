"""Helpers for in-process tests of the authorization endpoint (Django's test client)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any
from urllib.parse import urlencode

from django.test import Client

VERIFIER = "v" * 64


def authorize(browser: Client, *, client_id: str, redirect_uri: str, scope: str = "mcp:read") -> Any:
    """GET the authorization endpoint as a signed-in person's browser would, with PKCE S256."""
    challenge = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": scope,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s",
        }
    )
    return browser.get(f"/oauth/authorize/?{query}")
