"""Every place a person's password is chosen through Gatehouse goes through Django's validators
(settings.AUTH_PASSWORD_VALIDATORS): the admin's add-user and change-password forms, the password
bootstrap_demo generates, and ``DEMO_PASSWORD``, which ``bootstrap_demo`` and ``make run`` refuse
in one line when a validator does (tests/portal/test_bootstrap_demo.py, tests/portal/test_prepare_run.py). One
place deliberately does not: ``createsuperuser --noinput`` with ``DJANGO_SUPERUSER_PASSWORD``
(Django skips validation there by design; its interactive mode validates and asks before
bypassing)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.management import call_command

from accounts.models import Tenant, User
from tests.support.factories import DEFAULT_PASSWORD, UserFactory

pytestmark = pytest.mark.django_db

COMMON = "password123"
TOO_COMMON = "This password is too common."


def test_the_admin_refuses_a_common_password_for_a_new_user(operator, client):
    response = client.post(
        "/admin/accounts/user/add/",
        {"username": "newcomer", "usable_password": "true", "password1": COMMON, "password2": COMMON},
    )

    assert response.status_code == 200
    assert TOO_COMMON in response.content.decode()
    assert not User.objects.filter(username="newcomer").exists()


def test_the_admin_refuses_a_common_password_when_changing_one(operator, client):
    person = UserFactory.create(username="changing")

    response = client.post(
        f"/admin/accounts/user/{person.pk}/password/",
        {"usable_password": "true", "password1": COMMON, "password2": COMMON},
    )

    assert response.status_code == 200
    assert TOO_COMMON in response.content.decode()
    person.refresh_from_db()
    assert person.check_password(DEFAULT_PASSWORD)


def test_the_generated_demo_password_satisfies_the_validators(monkeypatch, capsys):
    User.objects.filter(username__in=["alice", "bob", "carol"]).delete()
    Tenant.objects.filter(slug__in=["acme", "globex"]).delete()
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)

    call_command("bootstrap_demo")

    generated = re.search(r"Generated password for [a-z, ]+: (\S+)", capsys.readouterr().out)
    assert generated is not None
    for user in User.objects.filter(username__in=["alice", "bob", "carol"]):
        validate_password(generated.group(1), user=user)
