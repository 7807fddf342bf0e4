"""Three processes spending the last of a budget at the same moment: budget decisions are taken one at
a time per tenant and each call in flight holds its reservation, so a call starts only while what is
recorded plus what is reserved is under the limit. With 1,000 tokens left and 800 reserved per call,
exactly two start (the second starts at 800 of 1,000: the budget is exceeded by at most the last
call started under it) and the third is refused, whatever the interleaving."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from language_models.models import LlmBudget, LlmUsage, UsageOutcome
from tests.support.factories import MembershipFactory
from tests.support.python_process import committed_database_url

PROCESSES = 3
RESERVED = 800
LIMIT = 1000

SPENDER = f"""
import sys

import django

django.setup()
from django.db import connection

from core.errors import BudgetExceeded
from core.identity import Identity
from language_models.governed.usage import UsageStart, usage_begin

tenant_id, user_id = int(sys.argv[1]), int(sys.argv[2])
identity = Identity(user_id=user_id, username="spender", tenant_id=tenant_id, tenant_slug="t",
    tenant_name="T", role="admin", scopes=frozenset(), application_id=0, client_id="c",
    client_name="C", token_id=0)
start = UsageStart(identity=identity, feature="api", channel="api", provider="openai", model="m",
    key_source="", structured=False, request_id="")
connection.ensure_connection()
print("ready", flush=True)
sys.stdin.readline()
try:
    usage_begin(start=start, reserve_tokens={RESERVED}, reserve_cost=None)
    print("started", flush=True)
except BudgetExceeded:
    print("refused", flush=True)
"""


@pytest.mark.django_db(transaction=True)
def test_three_processes_spending_the_last_of_a_budget_start_two_calls():
    membership = MembershipFactory.create(role="admin")
    LlmBudget.objects.create(tenant=membership.tenant, period="day", max_tokens=LIMIT)
    env = {
        **os.environ,
        "DATABASE_URL": committed_database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LOG_LEVEL": "ERROR",
    }
    args = [sys.executable, "-c", SPENDER, str(membership.tenant_id), str(membership.user_id)]
    spenders = [
        subprocess.Popen(
            args, env=env, cwd=settings.BASE_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(PROCESSES)
    ]
    try:
        # Every process connected and waiting: then all are let go at once.
        for spender in spenders:
            assert spender.stdout is not None
            assert spender.stdout.readline().strip() == "ready"
        for spender in spenders:
            assert spender.stdin is not None
            spender.stdin.write("go\n")
            spender.stdin.flush()
        outcomes = sorted(spender.communicate(timeout=60)[0].strip() for spender in spenders)
    finally:
        for spender in spenders:
            spender.kill()
    assert outcomes == ["refused", "started", "started"]
    records = LlmUsage.objects.filter(tenant=membership.tenant)
    assert records.filter(outcome=UsageOutcome.PENDING).count() == 2
    assert records.filter(outcome=UsageOutcome.REFUSED).count() == 1
