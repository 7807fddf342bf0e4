"""Members of the test tenant as fixtures, with the ``Identity`` their calls carry: the model-call
tests of ``language_models`` and ``llm_gateway`` share them."""

from __future__ import annotations

import pytest

from accounts.models import Membership
from core.identity import Identity
from tests.support.factories import MembershipFactory, UserFactory

LLM_INVOKE_SCOPE = "llm:invoke"


def identity_of(membership: Membership, *, application_id: int = 0) -> Identity:
    return Identity(
        user_id=membership.user_id,
        username=membership.user.username,
        tenant_id=membership.tenant_id,
        tenant_slug=membership.tenant.slug,
        tenant_name=membership.tenant.name,
        role=membership.role,
        scopes=frozenset({LLM_INVOKE_SCOPE}),
        application_id=application_id,
        client_id="client",
        client_name="Client",
        token_id=0,
    )


@pytest.fixture
def contributor(tenant) -> Membership:
    return MembershipFactory.create(
        user=UserFactory.create(username="contributor"), tenant=tenant, role="contributor"
    )
