"""Personas and helpers for the LLM gateway's service tests: a contributor of one tenant calling
through the gateway, an outsider tenant with its own key, and the litellm script hook (purpose
``gateway``) answering every call through litellm's own ``mock_response``."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from core.identity import Identity
from llm_gateway.schemas import InvokeRequest
from tests.support import members
from tests.support.factories import ApplicationFactory, LanguageModelFactory, MembershipFactory, UserFactory
from tests.support.llm_script_support import llm_script  # noqa: F401  (a fixture)
from tests.support.members import identity_of

contributor = members.contributor

STORED_KEY = "sk-stored-acme-0123456789abcdef"
OUTSIDER_KEY = "sk-stored-other-tenant-fedcba9876543210"
HEADER_KEY = "sk-header-caller-only-5f3a9c1e7b2d4a60"


def invoke_request(**overrides: Any) -> InvokeRequest:
    values: dict[str, Any] = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "What is an MCP gateway?"}],
        **overrides,
    }
    return InvokeRequest.model_validate(values)


@pytest.fixture(autouse=True)
async def _close_async_orm_connections(fresh_hot_path_pool):
    """db_call runs the ORM on asgiref's thread, outside pytest-django's care; and a model call's
    audit row goes through the hot-path pool of this test's loop (closed after it)."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def caller(contributor) -> Identity:
    return identity_of(contributor, application_id=ApplicationFactory.create().pk)


@pytest.fixture
def colleague(tenant) -> Identity:
    return identity_of(
        MembershipFactory.create(user=UserFactory.create(username="colleague"), tenant=tenant, role="admin")
    )


@pytest.fixture
def stored_openai(tenant):
    """The tenant's default model, openai/gpt-4o-mini, with its stored key."""
    return LanguageModelFactory(
        tenant=tenant, name="Fast", model="openai/gpt-4o-mini", api_key=STORED_KEY, is_default=True
    )


@pytest.fixture
def outsider_openai(outsider):
    return LanguageModelFactory(
        tenant=outsider.tenant,
        name="Theirs",
        model="openai/gpt-4o-mini",
        api_key=OUTSIDER_KEY,
        is_default=True,
    )
