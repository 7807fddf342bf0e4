"""People the console's tests sign in as: ada, an admin of the test's tenant, and vic, a viewer
there (a module that needs them otherwise defines its own)."""

from __future__ import annotations

import pytest

from accounts.models import Role, User
from tests.support.factories import MembershipFactory, UserFactory


def _signed_in(client, tenant, *, username: str, role: Role) -> User:
    person = UserFactory.create(username=username)
    MembershipFactory.create(user=person, tenant=tenant, role=role)
    client.force_login(person)
    return person


@pytest.fixture
def ada(client, tenant) -> User:
    return _signed_in(client, tenant, username="ada", role=Role.ADMIN)


@pytest.fixture
def vic(client, tenant) -> User:
    return _signed_in(client, tenant, username="vic", role=Role.VIEWER)
