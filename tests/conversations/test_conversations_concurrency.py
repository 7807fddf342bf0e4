"""Conversations under concurrent calls, each on its own database connection as on separate
workers: two first initializes, racing turns, two rotations choosing one topic; and the same
services on the embedded SQLite database."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction

from conversations.models import Conversation, SessionBinding
from conversations.services import conversation_initialize, conversation_rotate
from conversations.turn_lock import turn_lock_take
from core.errors import Conflict
from tests.support.factories import ConversationFactory, SessionBindingFactory
from tests.support.python_process import python_run

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "session:race"


def _in_threads(count: int, work: Callable[[], Any]) -> list[Any]:
    """``work`` run by ``count`` threads released together; each result or exception, in order."""
    start = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        try:
            start.wait()
            results[index] = work()
        except Exception as error:
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_first_initializes_of_one_session_end_on_one_conversation(member):
    def initialize() -> Any:
        return conversation_initialize(
            key=KEY,
            user_id=member.user_id,
            tenant_id=member.tenant_id,
            client_id="claude",
            conversation_id=None,
            first_context="orders",
        ).conversation_id

    results = _in_threads(2, initialize)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert results[0] == results[1]
    assert list(Conversation.objects.values_list("pk", flat=True)) == [results[0]]
    assert SessionBinding.objects.get(key=KEY).conversation_id == results[0]


def test_of_turns_started_together_exactly_one_runs(member):
    binding = SessionBindingFactory.create(conversation=ConversationFactory.create(membership=member))
    results = _in_threads(4, lambda: turn_lock_take(key=binding.key, seconds=60))
    refused = [r for r in results if isinstance(r, Conflict)]
    assert results.count(None) == 1
    assert len(refused) == 3
    assert all(1 <= error.retry_after_seconds <= 60 for error in refused)


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return bool(cursor.fetchone()[0])


def test_a_topic_taken_while_a_rotation_writes_is_retried_with_a_suffix(member):
    SessionBindingFactory.create(key=KEY, conversation=ConversationFactory.create(membership=member))
    other = ConversationFactory.create(membership=member)
    holding, release = threading.Event(), threading.Event()

    def take_the_topic_first() -> None:
        try:
            with transaction.atomic():
                Conversation.objects.filter(pk=other.pk).update(topic="Sales", topic_key="sales")
                holding.set()
                release.wait(timeout=60)
        finally:
            connections["default"].close()

    first = threading.Thread(target=take_the_topic_first)
    first.start()
    assert holding.wait(timeout=60)
    rotation: list[Any] = []

    def rotate() -> None:
        try:
            rotation.append(
                conversation_rotate(
                    key=KEY,
                    user_id=member.user_id,
                    tenant_id=member.tenant_id,
                    topic="SALES",
                    summary="",
                    derived=False,
                )
            )
        except Exception as error:
            rotation.append(error)
        finally:
            connection.close()

    second = threading.Thread(target=rotate)
    second.start()
    # The rotation cannot see the uncommitted topic, so it writes the same key and waits on the
    # unique index; once it waits, the first transaction commits and the rotation must retry.
    for _ in range(600):
        if _waiting_on_a_lock() or not second.is_alive():
            break
        time.sleep(0.05)
    release.set()
    first.join()
    second.join()
    assert not isinstance(rotation[0], Exception), rotation
    assert sorted(Conversation.objects.exclude(topic="").values_list("topic", flat=True)) == [
        "SALES (2)",
        "Sales",
    ]


SQLITE_SCRIPT = """
import json
from datetime import timedelta
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.utils import timezone
from accounts.models import Tenant, User
from conversations.models import SessionBinding
from conversations.services import conversation_initialize, conversation_rotate, turn_feedback
from conversations.services import turn_record
from conversations.turn_lock import turn_lock_release, turn_lock_take
from core.errors import Conflict

user = User.objects.create_user(username="ada", password="x")
tenant = Tenant.objects.create(slug="acme", name="Acme")
ids = {"user_id": user.pk, "tenant_id": tenant.pk}
key = "client:1:1:claude"
binding = conversation_initialize(
    key=key, client_id="claude", conversation_id=None, first_context="orders", **ids
)
out = {}
turn_lock_take(key=key, seconds=30)
try:
    turn_lock_take(key=key, seconds=30)
except Conflict as error:
    out["retry"] = error.retry_after_seconds
turn_lock_release(key=key)
turn_lock_take(key=key, seconds=30)
SessionBinding.objects.filter(key=key).update(turn_until=timezone.now() - timedelta(seconds=1))
turn_lock_take(key=key, seconds=30)
out["taken_after_expiry"] = True
turn_record(conversation_id=binding.conversation_id, kind="command", request="r", output={}, traces=[],
            success=True, duration_ms=1.0)
out["score"] = turn_feedback(key=key, score=True, text=None, **ids).feedback_score
conversation_rotate(key=key, topic="Sales", summary="s", derived=True, **ids)
conversation_rotate(key=key, topic="sales", summary="s", derived=True, **ids)
out["topics"] = sorted(
    t for t in SessionBinding.objects.get(key=key).user.conversations.values_list("topic", flat=True) if t
)
print(json.dumps(out))
"""


def test_the_services_work_the_same_on_sqlite(tmp_path):
    done = python_run(
        ["-c", SQLITE_SCRIPT],
        env={
            "PATH": "/usr/bin:/bin",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": "sqlite-test-secret",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'gatehouse.sqlite3'}",
        },
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert 1 <= outcome["retry"] <= 30
    assert outcome["taken_after_expiry"] is True
    assert outcome["score"] == 1.0
    assert outcome["topics"] == ["Sales", "sales (2)"]
