"""What the LLM gateway's end-to-end tests share (their server, ``gateway_server``, and its LLM
script, ``script_path``, are fixtures in conftest): tokens minted for the API or for /mcp, the
script's next answers, and a client that speaks the REST API."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx

from accounts.models import Membership, Role
from tests.e2e.harness import DaphneServer
from tests.support.factories import (
    AccessTokenFactory,
    ApplicationFactory,
    LanguageModelFactory,
    MembershipFactory,
)

INVOKE = "/api/v1/llm/invoke"
PROVIDERS = "/api/v1/providers"
MESSAGES = [
    {"role": "system", "content": "Answer in one sentence."},
    {"role": "user", "content": "What is Gatehouse?"},
]
ACME_OPENAI_KEY = "sk-acme-stored-key-0123456789"


def invoke_body(**overrides: Any) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-4o-mini", "messages": MESSAGES, **overrides}


def script(path: Path, *responses: Any) -> None:
    """The next gateway calls' answers, in order (the last answers every later call)."""
    path.write_text(
        json.dumps({"responses": {"gateway": list(responses) if len(responses) > 1 else responses[0]}})
    )


def mint(*, username: str, tenant: str, scope: str, resource: str) -> str:
    """An hour's token for ``username`` in ``tenant`` bound to ``resource``, as the OAuth flow would
    have issued it (the flows themselves are tested in test_api_tokens)."""
    token = secrets.token_urlsafe(30)
    AccessTokenFactory(
        membership=Membership.objects.get(user__username=username, tenant__slug=tenant),
        application=ApplicationFactory(),
        token=token,
        scope=scope,
        resource=[resource],
    )
    return token


def api_token(committed, server: DaphneServer, *, username: str = "alice", tenant: str = "acme",
              scope: str = "llm:invoke mcp:read") -> str:  # fmt: skip
    return str(
        committed(mint, username=username, tenant=tenant, scope=scope, resource=f"{server.public_url}/api")
    )


def mcp_token(committed, server: DaphneServer, *, username: str = "alice", tenant: str = "acme",
              scope: str = "llm:invoke mcp:read") -> str:  # fmt: skip
    return str(committed(mint, username=username, tenant=tenant, scope=scope, resource=server.resource_url))


def api_client(server: DaphneServer, token: str | None = None, **headers: str) -> httpx.AsyncClient:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=60)


def assert_error(response: httpx.Response, *, status: int, code: str) -> dict[str, Any]:
    """The one error shape, with this status and code; returns the error object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str), body
    assert body["error"]["message"], body
    return dict(body["error"])


def own_tenant_admin(committed: Any) -> Any:
    """An admin of a tenant of the test's own, with an OpenAI key stored: budgets, usage sums and
    totals see only this test's calls."""
    membership = committed(MembershipFactory, role=Role.ADMIN)
    committed(
        LanguageModelFactory,
        tenant=membership.tenant,
        model="openai/gpt-4o-mini",
        api_key="sk-own-tenant-key",
        is_default=True,
    )
    return membership
