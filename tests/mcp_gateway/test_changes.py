"""The change log (``mcp_gateway.kernel.changes``), what the data agent logs of an ontology's edits, the
session's resource subscriptions, and a standalone stream refused cleanly when the log cannot be
read."""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.utils import timezone

from core.errors import InvalidInput
from core.models import AuditAction, AuditEvent, AuditOutcome
from data_agent.resources import DATASET_URI, LIST_URI, ONTOLOGY_URI
from mcp_gateway.kernel.changes import (
    REPLAY_MAX,
    change_log_latest,
    change_log_purge,
    change_log_since,
    change_record,
)
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.sessions import LiveSession
from mcp_gateway.models import ChangeEvent, ChangeKind, ResourceSubscription
from mcp_gateway.pipeline.list_changes import ListChanges
from mcp_gateway.pipeline.resource_subscriptions import (
    MAX_SUBSCRIPTIONS_PER_SESSION,
    resource_subscribe,
    resource_subscribers,
    resource_unsubscribe,
)
from mcp_gateway.transport import standalone_stream
from tests.support.factories import DatasetFactory, IdentityFactory, McpSessionFactory, OntologyFactory

pytestmark = pytest.mark.django_db


def _record(tenant_id: int = 1, **kwargs: Any) -> int:
    change_record(tenant_id=tenant_id, kind=kwargs.pop("kind", ChangeKind.UPSTREAM), **kwargs)
    return change_log_latest()


def test_a_reconnecting_client_is_told_its_tenants_changes_after_its_position_in_order():
    first = _record()
    _record(tenant_id=2)
    second = _record(kind=ChangeKind.RESOURCE, uri="gatehouse://ontologies")
    changes = change_log_since(tenant_id=1, after_id=first)
    assert changes is not None
    assert [(c.id, c.uri) for c in changes] == [(second, "gatehouse://ontologies")]
    assert change_log_since(tenant_id=1, after_id=second) == []


def test_a_position_older_than_the_log_or_too_far_behind_cannot_be_answered():
    first = _record()
    ChangeEvent.objects.filter(pk=first).delete()
    _record()
    assert change_log_since(tenant_id=1, after_id=first - 5) is None
    ChangeEvent.objects.bulk_create([ChangeEvent(tenant_id=1, kind=ChangeKind.UPSTREAM)] * (REPLAY_MAX + 1))
    assert change_log_since(tenant_id=1, after_id=first) is None


def test_the_purge_forgets_old_changes_but_keeps_the_newest():
    old, newest = _record(), _record()
    ChangeEvent.objects.update(created=timezone.now() - timedelta(days=2))
    assert change_log_purge() == 1
    assert list(ChangeEvent.objects.values_list("id", flat=True)) == [newest]
    assert old < newest


def test_a_uri_too_long_to_keep_is_not_logged():
    before = change_log_latest()
    change_record(tenant_id=1, kind=ChangeKind.RESOURCE, uri="x" * 5000)
    assert change_log_latest() == before


def test_an_ontology_edit_logs_each_uri_it_touches_once_after_commit(django_capture_on_commit_callbacks):
    ontology = OntologyFactory.create()
    dataset = DatasetFactory.create(ontology=ontology)
    start = change_log_latest()
    with django_capture_on_commit_callbacks(execute=True):
        dataset.save()
        ontology.save()
    logged = ChangeEvent.objects.filter(pk__gt=start, tenant_id=ontology.tenant_id)
    assert sorted(logged.values_list("uri", flat=True)) == sorted(
        [
            LIST_URI,
            ONTOLOGY_URI.format(id=ontology.pk),
            DATASET_URI.format(id=ontology.pk, name=dataset.name),
        ]
    )
    assert set(logged.values_list("tenant_id", "kind")) == {(ontology.tenant_id, ChangeKind.RESOURCE)}


def test_an_ontology_deleted_with_its_datasets_is_announced_without_error(django_capture_on_commit_callbacks):
    ontology = OntologyFactory.create()
    DatasetFactory.create_batch(3, ontology=ontology)
    start, uri = change_log_latest(), ONTOLOGY_URI.format(id=ontology.pk)
    with django_capture_on_commit_callbacks(execute=True):
        ontology.delete()
    logged = ChangeEvent.objects.filter(pk__gt=start, tenant_id=ontology.tenant_id)
    uris = list(logged.values_list("uri", flat=True))
    assert uri in uris
    assert len(uris) == len(set(uris))


def test_subscriptions_are_the_sessions_bounded_and_idempotent():
    session = McpSessionFactory.create()
    resource_subscribe(session_id=session.pk, uri="gatehouse://ontologies")
    resource_subscribe(session_id=session.pk, uri="gatehouse://ontologies")
    assert resource_subscribers(session_ids=[session.pk, "other"], uri="gatehouse://ontologies") == {
        session.pk
    }
    for index in range(MAX_SUBSCRIPTIONS_PER_SESSION - 1):
        resource_subscribe(session_id=session.pk, uri=f"test://{index}")
    with pytest.raises(InvalidInput):
        resource_subscribe(session_id=session.pk, uri="test://one-too-many")
    resource_unsubscribe(session_id=session.pk, uri="gatehouse://ontologies")
    resource_subscribe(session_id=session.pk, uri="test://one-too-many")
    assert ResourceSubscription.objects.filter(session=session).count() == MAX_SUBSCRIPTIONS_PER_SESSION


@pytest.mark.parametrize("uri", ["", "a\x00b", "a\nb", "x" * 2001, "gatehouse://\ud800"])
def test_a_hostile_uri_is_refused(uri):
    session = McpSessionFactory.create()
    with pytest.raises(InvalidInput):
        resource_subscribe(session_id=session.pk, uri=uri)
    assert not ResourceSubscription.objects.exists()


@pytest.mark.django_db(transaction=True)  # the audit row is written on a connection of its own
async def test_a_stream_is_refused_with_503_when_the_change_log_cannot_be_read(
    monkeypatch, fresh_hot_path_pool
):
    def dead() -> int:
        raise OperationalError("the database went away")

    monkeypatch.setattr(standalone_stream, "change_log_latest", dead)
    streams = standalone_stream.StandaloneStreams(
        changes=ListChanges(registry=default_registry(), postgres=False)
    )
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    session = LiveSession(
        id="s" * 43, scopes=frozenset(), protocol_version="2025-11-25", last_seen=timezone.now()
    )
    identity = IdentityFactory.build()
    scope = {"type": "http", "method": "GET", "headers": [(b"accept", b"text/event-stream")]}
    await streams.serve(scope, receive, send, session=session, identity=identity)
    assert sent[0]["status"] == 503
    assert json.loads(sent[1]["body"])["error"]["code"] == -32005
    assert len(streams) == 0
    # The identity's application is no row here: the audit store keeps the row, degraded.
    [event] = [event async for event in AuditEvent.objects.filter(session_id=session.id)]
    assert (event.action, event.outcome, event.target) == (
        AuditAction.SERVER_ERROR,
        AuditOutcome.ERROR,
        standalone_stream.STREAM_TARGET,
    )
