from __future__ import annotations

import pytest
from django.conf import settings

from tests.factories import MembershipFactory, TenantFactory, UserFactory


def pytest_configure(config: pytest.Config) -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(f"The test suite runs on PostgreSQL; set DATABASE_URL (engine is {engine}).")


@pytest.fixture
def tenant(db):
    return TenantFactory(slug="acme-test", name="Acme Test")


@pytest.fixture
def owner(db, tenant):
    return MembershipFactory(user=UserFactory(username="owner"), tenant=tenant, role="admin")


@pytest.fixture
def member(db, tenant):
    return MembershipFactory(user=UserFactory(username="member"), tenant=tenant, role="viewer")


@pytest.fixture
def outsider(db):
    return MembershipFactory(
        user=UserFactory(username="outsider"), tenant=TenantFactory(slug="other-test"), role="admin"
    )
