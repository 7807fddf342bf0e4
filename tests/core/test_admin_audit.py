"""The audit trail in the admin: read-only, filterable, exported as CSV."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import User
from core.admin import LIST_TEXT_MAX_CHARS
from core.audit.export import AUDIT_CSV_COLUMNS
from core.models import AuditEvent
from tests.support.admin_support import admin_url, post_action
from tests.support.factories import ApplicationFactory, AuditEventFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_an_audit_event_page_shows_every_field_read_only(client, operator):
    event = AuditEventFactory.create(detail={"arguments": {"name": "Ada"}}, target="set_display_name")
    response = client.get(admin_url(AuditEvent, "change", event.pk))
    content = response.content.decode()
    for value in (event.request_id, event.session_id, event.username, "set_display_name", "Ada", "127.0.0.1"):
        assert value in content
    assert response.context["has_change_permission"] is False
    assert 'name="_save"' not in content


def test_audit_events_cannot_be_added_changed_or_deleted(client, operator):
    event = AuditEventFactory.create(target="whoami")
    assert client.post(admin_url(AuditEvent, "add"), {"action": "tool.called"}).status_code == 403
    changed = client.post(
        admin_url(AuditEvent, "change", event.pk), {"action": "login.failed", "target": "x"}
    )
    assert changed.status_code == 403
    assert client.post(admin_url(AuditEvent, "delete", event.pk), {"post": "yes"}).status_code == 403
    post_action(client, AuditEvent, "delete_selected", [event])
    event.refresh_from_db()
    assert (event.action, event.target) == ("tool.called", "whoami")


def test_the_user_filter_lists_that_users_events(client, operator, member, outsider):
    mine = AuditEventFactory.create(membership=member)
    AuditEventFactory.create(membership=outsider)
    response = client.get(admin_url(AuditEvent, "changelist"), {"user": "member"})
    assert [e.pk for e in response.context["cl"].result_list] == [mine.pk]
    assert 'value="member"' in response.content.decode()


def _listed_queries(client: Any) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(admin_url(AuditEvent, "changelist")).status_code == 200
    return len(queries)


def test_the_list_names_each_event_s_client_and_reads_them_in_one_query(client, operator, member):
    AuditEventFactory.create(membership=member, application=ApplicationFactory.create(name="Claude Desktop"))
    few = _listed_queries(client)
    for n in range(6):
        application = ApplicationFactory.create(name=f"Client {n}")
        AuditEventFactory.create(membership=member, application=application, client_id=application.client_id)

    page = client.get(admin_url(AuditEvent, "changelist")).content.decode()

    assert "Claude Desktop" in page
    assert "Client 5" in page
    print(f"audit list queries: {few} with one event, {_listed_queries(client)} with seven")
    assert _listed_queries(client) == few, "one more query per row: the client is not joined"


def test_a_deleted_client_s_events_show_its_id_and_long_values_are_cut(client, operator, member):
    AuditEventFactory.create(membership=member, application=None, client_id="gone-client-id")
    AuditEventFactory.create(membership=member, target="t" * 500)

    page = client.get(admin_url(AuditEvent, "changelist")).content.decode()

    assert "gone-client-id" in page
    assert "t" * LIST_TEXT_MAX_CHARS not in page
    assert "t" * (LIST_TEXT_MAX_CHARS - 1) + "…" in page


def _csv_rows(response: Any) -> list[list[str]]:
    import csv
    import io

    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_exporting_selected_events_writes_them_as_csv(client, operator, member):
    first = AuditEventFactory.create(membership=member, target="whoami", duration_ms=2.5, detail={"n": 1})
    second = AuditEventFactory.create(membership=member, action="login.failed", outcome="denied")
    AuditEventFactory.create(membership=member)
    response = client.post(
        admin_url(AuditEvent, "changelist"),
        {"action": "export_csv", "_selected_action": [first.pk, second.pk]},
    )
    header, *rows = _csv_rows(response)
    assert header == list(AUDIT_CSV_COLUMNS)
    by_action = {row[1]: dict(zip(header, row, strict=True)) for row in rows}
    assert set(by_action) == {"tool.called", "login.failed"}
    called = by_action["tool.called"]
    assert called["tenant"] == member.tenant.slug
    assert called["username"] == "member"
    assert called["request_id"] == first.request_id
    assert called["target"] == "whoami"
    assert called["duration_ms"] == "2.5"
    assert called["detail"] == '{"n": 1}'
    assert by_action["login.failed"]["outcome"] == "denied"


def test_exporting_all_across_a_filtered_list_exports_every_match(client, operator, member):
    denied = [AuditEventFactory.create(membership=member, outcome="denied") for _ in range(3)]
    AuditEventFactory.create(membership=member)
    response = client.post(
        admin_url(AuditEvent, "changelist") + "?outcome__exact=denied",
        {"action": "export_csv", "_selected_action": [denied[0].pk], "select_across": "1"},
    )
    _, *rows = _csv_rows(response)
    assert sorted(row[7] for row in rows) == sorted(e.request_id for e in denied)


def test_the_export_link_exports_the_current_filtered_list(client, operator, member, outsider):
    AuditEventFactory.create(membership=member)
    theirs = AuditEventFactory.create(membership=outsider)
    changelist = client.get(admin_url(AuditEvent, "changelist"), {"tenant__id__exact": outsider.tenant.pk})
    export_url = reverse("admin:core_auditevent_export") + f"?tenant__id__exact={outsider.tenant.pk}"
    assert export_url.replace("&", "&amp;") in changelist.content.decode()
    _, *rows = _csv_rows(client.get(export_url))
    assert [row[7] for row in rows] == [theirs.request_id]


def test_spreadsheet_formulas_in_exported_text_are_defused(client, operator, member):
    AuditEventFactory.create(membership=member, username="=HYPERLINK(1)", target="+SUM(A1)")
    _, row = _csv_rows(client.get(reverse("admin:core_auditevent_export")))
    assert row[4] == "'=HYPERLINK(1)"
    assert row[9] == "'+SUM(A1)"


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_the_export_streams_in_chunks(async_client):
    @sync_to_async
    def setup() -> User:
        operator = UserFactory.create(username="operator", is_staff=True, is_superuser=True)
        event = AuditEventFactory.create()
        AuditEvent.objects.bulk_create(
            AuditEvent(action="tool.called", tenant=event.tenant, username=f"u{i}") for i in range(4500)
        )
        return operator

    await async_client.aforce_login(await setup())
    try:
        response = await async_client.get(reverse("admin:core_auditevent_export"))
        assert response.status_code == 200
        assert response.is_async
        chunks = [chunk async for chunk in response.streaming_content]
    finally:
        # The test client keeps the database thread's connection open; the test database must go.
        await sync_to_async(connections.close_all)()
    assert len(chunks) > 1
    lines = b"".join(chunks).decode().splitlines()
    assert len(lines) == 1 + 4501
