"""What the console upstreams page's tests share: its addresses, a complete form as posted, the
messages a response left, and a stored upstream with a static header credential."""

from __future__ import annotations

from typing import Any

from django.contrib.messages import get_messages

from core.crypto import secret_encrypt
from tests.support.upstream_support import upstream_row
from upstreams.models import AuthKind, Upstream

SECRET = "Bearer upstream-s3cr3t-4f1e"


def upstreams_url(tenant, action: str = "") -> str:
    return f"/console/{tenant.slug}/upstreams/{action}"


def console_form(**overrides: Any) -> dict[str, Any]:
    data = {
        "name": "docs",
        "transport": "http",
        "url": "https://docs.example/mcp",
        "auth": "none",
        "header_name": "",
        "header_value": "",
        "oauth_client_id": "",
        "oauth_client_secret": "",
        "oauth_scope": "",
        "include_tools": "",
        "exclude_tools": "",
        "scopes": ["mcp:read"],
        **overrides,
    }
    return {key: value for key, value in data.items() if value is not None}


def messages_of(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def stored_header(tenant, **fields: Any) -> Upstream:
    return upstream_row(
        tenant=tenant.slug,
        name="docs",
        **{
            "url": "https://docs.example/mcp",
            "enabled": False,
            "auth": AuthKind.HEADER,
            "header_name": "Authorization",
            "header_value_encrypted": secret_encrypt(plaintext=SECRET),
            **fields,
        },
    )
