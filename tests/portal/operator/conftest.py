"""People the operators' dashboard is for, and not for, and a way to put a day's traffic in a tenant."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from accounts.models import User
from tests.support.factories import UserFactory


def noon(days_ago: int) -> datetime:
    """Noon UTC ``days_ago`` days before today: on that day whatever the time of the run."""
    return datetime.combine(
        timezone.now().astimezone(UTC).date() - timedelta(days=days_ago), time(12), tzinfo=UTC
    )


@pytest.fixture
def operator(client) -> User:
    person = UserFactory.create(username="olga", is_staff=True, is_superuser=True)
    client.force_login(person)
    return person


@pytest.fixture
def auditor(client) -> User:
    """Staff who may view the audit trail, and nothing else."""
    person = UserFactory.create(username="audrey", is_staff=True)
    person.user_permissions.add(
        Permission.objects.get(codename="view_auditevent", content_type__app_label="core")
    )
    client.force_login(person)
    return person


@pytest.fixture
def clerk(client) -> User:
    """Staff without the audit trail."""
    person = UserFactory.create(username="clem", is_staff=True)
    client.force_login(person)
    return person


@pytest.fixture
def member(client) -> User:
    """Signed in, not staff."""
    person = UserFactory.create(username="mona")
    client.force_login(person)
    return person
