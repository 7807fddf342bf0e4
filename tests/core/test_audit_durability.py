"""The audit trail keeps every row: hostile text made storable, refused rows stored degraded,
rows the database cannot take spooled and replayed once, repeated refusals counted."""

from __future__ import annotations

import json

import pytest
from django.db import OperationalError

from core.audit import store as audit_store
from core.audit.entry import SANITIZED_KEY, AuditEntry, entry_storable
from core.audit.refusals import audit_refusal_record, audit_refusals_flush
from core.audit.spool import LOST, REPLAYED, SPOOLED, audit_rows_write, audit_spool_replay, spool_dir
from core.audit.trail import audit_record
from core.models import AuditAction, AuditEvent, AuditOutcome

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def spool_in_tmp(settings, tmp_path):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_SPOOL_DIR": str(tmp_path / "spool")}
    return tmp_path / "spool"


def test_a_nul_and_a_lone_surrogate_are_escaped_visibly_and_the_row_says_so():
    entry = AuditEntry(
        action=AuditAction.TOOL_CALLED,
        username="eve\x00",
        target="who\ud800ami",
        detail={"arguments": {"x": "a\x00b", "k\x00": [float("nan")]}},
    )
    safe = entry_storable(entry)
    assert safe.username == "eve\\u0000"
    assert safe.target == "who\\ud800ami"
    assert safe.detail["arguments"] == {"x": "a\\u0000b", "k\\u0000": ["nan"]}
    assert safe.detail[SANITIZED_KEY] == ["username", "target", "detail"]
    assert SANITIZED_KEY not in entry_storable(AuditEntry(action="x", detail={"a": "clean"})).detail


def test_audit_record_stores_a_nul_in_detail_target_and_username():
    audit_record(
        action=AuditAction.LOGIN_FAILED,
        outcome=AuditOutcome.DENIED,
        username="mallory\x00",
        target="/accounts/login/\x00",
        detail={"reason": "bad\x00password"},
    )
    event = AuditEvent.objects.get(action=AuditAction.LOGIN_FAILED)
    assert event.username == "mallory\\u0000"
    assert event.target == "/accounts/login/\\u0000"
    assert event.detail["reason"] == "bad\\u0000password"
    assert event.detail[SANITIZED_KEY] == ["username", "target", "detail"]


def test_one_refused_row_does_not_take_its_batch_with_it():
    good = [AuditEntry(action=AuditAction.TOOL_CALLED, target=f"t{i}") for i in range(3)]
    bad = AuditEntry(action=AuditAction.TOOL_CALLED, target="bad", ip="not-an-address")
    assert audit_store.audit_rows_insert([good[0], bad, good[1], good[2]]) == 4
    stored = {event.target: event for event in AuditEvent.objects.all()}
    assert set(stored) == {"t0", "t1", "t2", "bad"}
    assert stored["bad"].ip is None
    assert stored["bad"].detail["error"]
    assert "unstorable" in stored["bad"].detail


def test_a_row_inserted_twice_is_stored_once():
    entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="once")
    assert audit_store.audit_rows_insert([entry]) == 1
    assert audit_store.audit_rows_insert([entry]) == 0
    assert AuditEvent.objects.filter(target="once").count() == 1


def _database_away(monkeypatch):
    def unreachable(batch):
        raise OperationalError("connection refused")

    monkeypatch.setattr(audit_store, "_execute", unreachable)


def test_rows_the_database_cannot_take_are_spooled_and_replayed_exactly_once(monkeypatch, spool_in_tmp):
    entries = [AuditEntry(action=AuditAction.TOOL_CALLED, target=f"spooled-{i}") for i in range(3)]
    spooled_before = SPOOLED._value.get()
    replayed_before = REPLAYED._value.get()
    with monkeypatch.context() as patch:
        _database_away(patch)
        audit_rows_write(entries)
    assert SPOOLED._value.get() - spooled_before == 3
    [spool_file] = list(spool_in_tmp.iterdir())
    lines = spool_file.read_text().splitlines()
    assert [json.loads(line)["target"] for line in lines] == ["spooled-0", "spooled-1", "spooled-2"]
    assert not AuditEvent.objects.filter(target__startswith="spooled-").exists()

    # The same rows spooled a second time (a write retried after its row had in fact been spooled).
    with monkeypatch.context() as patch:
        _database_away(patch)
        audit_rows_write(entries[:1])

    assert audit_spool_replay() == 3
    assert REPLAYED._value.get() - replayed_before == 3
    assert sorted(AuditEvent.objects.values_list("target", flat=True)) == [
        "spooled-0",
        "spooled-1",
        "spooled-2",
    ]
    assert list(spool_dir().glob("*.jsonl")) == []
    assert audit_spool_replay() == 0


def test_a_replay_with_the_database_still_away_keeps_the_file(monkeypatch, spool_in_tmp):
    with monkeypatch.context() as patch:
        _database_away(patch)
        audit_rows_write([AuditEntry(action=AuditAction.TOOL_CALLED, target="kept")])
        assert audit_spool_replay() == 0
    assert len(list(spool_in_tmp.glob("*.jsonl"))) == 1
    assert audit_spool_replay() == 1


def test_a_torn_last_line_is_set_aside_and_the_rest_replayed(spool_in_tmp):
    spool_in_tmp.mkdir()
    whole = AuditEntry(action=AuditAction.TOOL_CALLED, target="whole")
    from core.audit.spool import _as_line

    (spool_in_tmp / "audit-dead-1.jsonl").write_text(_as_line(whole) + '{"action": "tool.ca')
    assert audit_spool_replay() == 1
    assert AuditEvent.objects.filter(target="whole").count() == 1
    assert (spool_in_tmp / "audit-dead-1.rejected").exists()


def test_an_unwritable_spool_leaves_the_row_in_the_log_and_counts_it(monkeypatch, spool_in_tmp, caplog):
    spool_in_tmp.write_text("a file where the directory should be")
    lost_before = LOST._value.get()
    with monkeypatch.context() as patch:
        _database_away(patch)
        audit_rows_write([AuditEntry(action=AuditAction.TOOL_CALLED, target="logged")])
    assert LOST._value.get() - lost_before == 1
    assert '"target": "logged"' in caplog.text


def test_repeated_refusals_of_one_key_are_counted_in_few_rows(user):
    for _ in range(50):
        audit_refusal_record(
            key="login",
            action=AuditAction.RATE_LIMITED,
            outcome=AuditOutcome.DENIED,
            user=user,
            detail={"scope": "login"},
        )
    audit_refusal_record(
        key="login", action=AuditAction.RATE_LIMITED, username="somebody-else", detail={"scope": "login"}
    )
    assert AuditEvent.objects.filter(action=AuditAction.RATE_LIMITED).count() == 2
    audit_refusals_flush()
    rows = list(AuditEvent.objects.filter(action=AuditAction.RATE_LIMITED, user=user))
    # Written at once and at the minute's end; both in one minute unless the test crossed one.
    assert 2 <= len(rows) <= 4
    assert sum(row.detail["count"] for row in rows) == 50
    assert {row.detail["scope"] for row in rows} == {"login"}
    assert any(row.detail.get("aggregated") for row in rows)


def test_a_window_of_zero_writes_every_refusal_as_its_own_row(user, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "AUDIT_REFUSAL_WINDOW_SECONDS": 0}
    for _ in range(3):
        audit_refusal_record(key="login", action=AuditAction.RATE_LIMITED, user=user, detail={})
    assert audit_refusals_flush() == 0
    rows = list(AuditEvent.objects.filter(action=AuditAction.RATE_LIMITED, user=user))
    assert [row.detail for row in rows] == [{"count": 1}] * 3


@pytest.fixture
def user(db):
    from tests.support.factories import UserFactory

    return UserFactory.create()


def test_the_replay_command_stores_a_spool_directory_copied_from_elsewhere(tmp_path):
    from django.core.management import call_command

    from core.audit.spool import _as_line

    elsewhere = tmp_path / "from-a-dead-host"
    elsewhere.mkdir()
    entry = AuditEntry(action=AuditAction.TOOL_CALLED, target="from-elsewhere")
    (elsewhere / "audit-gone-7.jsonl").write_text(_as_line(entry))
    call_command("audit_spool_replay", "--dir", str(elsewhere))
    call_command("audit_spool_replay", "--dir", str(elsewhere))
    assert AuditEvent.objects.filter(target="from-elsewhere").count() == 1
    assert not list(elsewhere.glob("*.jsonl"))


def test_the_spool_is_readable_by_the_server_s_own_user_only(monkeypatch, spool_in_tmp):
    with monkeypatch.context() as patch:
        _database_away(patch)
        audit_rows_write([AuditEntry(action=AuditAction.TOOL_CALLED, target="private")])
    [spool_file] = list(spool_in_tmp.glob("*.jsonl"))
    assert spool_in_tmp.stat().st_mode & 0o777 == 0o700
    assert spool_file.stat().st_mode & 0o777 == 0o600
