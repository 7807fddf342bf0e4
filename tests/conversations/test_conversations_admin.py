"""Conversations, turns and session bindings in the admin: operators look, nobody edits, and what
people and models wrote is shown escaped."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.db.models import Model

from conversations.models import Conversation, SessionBinding, Turn
from tests.support.admin_support import admin_url, post_action
from tests.support.factories import ConversationFactory, SessionBindingFactory, TurnFactory, UserFactory

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert('x')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"


def test_the_conversation_list_shows_topic_person_tenant_and_turn_count(client, operator, member):
    conversation = ConversationFactory.create(
        membership=member, topic="Quarterly sales", topic_key="quarterlysales"
    )
    TurnFactory.create(conversation=conversation)
    TurnFactory.create(conversation=conversation)
    response = client.get(admin_url(Conversation, "changelist"))
    assert response.status_code == 200
    [row] = response.context["cl"].result_list
    assert row.turn_total == 2
    page = response.content.decode()
    for value in ("Quarterly sales", "member", "Acme Test"):
        assert value in page


def test_the_list_searches_topics_and_usernames_and_filters_by_tenant(client, operator, member, outsider):
    mine = ConversationFactory.create(membership=member, topic="Churn review", topic_key="churnreview")
    theirs = ConversationFactory.create(membership=outsider, topic="Pricing", topic_key="pricing")
    url = admin_url(Conversation, "changelist")

    def listed(query: dict[str, object]) -> list[object]:
        return [c.pk for c in client.get(url, query).context["cl"].result_list]

    assert listed({"q": "churn"}) == [mine.pk]
    assert listed({"q": "outsider"}) == [theirs.pk]
    assert listed({"tenant__id__exact": outsider.tenant_id}) == [theirs.pk]


def test_a_conversation_page_is_read_only_with_its_turns_inline(client, operator, member):
    conversation = ConversationFactory.create(membership=member, topic="Orders", summary="Listed orders.")
    TurnFactory.create(conversation=conversation, request="orders/List_orders <limit>3</limit>")
    response = client.get(admin_url(Conversation, "change", conversation.pk))
    page = response.content.decode()
    assert response.status_code == 200
    assert response.context["has_change_permission"] is False
    assert 'name="_save"' not in page
    assert "Listed orders." in page
    assert "orders/List_orders &lt;limit&gt;3&lt;/limit&gt;" in page
    [inline] = response.context["inline_admin_formsets"]
    assert inline.has_add_permission is False
    assert inline.has_delete_permission is False


def test_a_turn_page_shows_its_json_pretty_printed_and_escaped(client, operator, member):
    turn = TurnFactory.create(
        conversation=ConversationFactory.create(membership=member),
        output={"command_name": "orders/List", "response": HOSTILE},
        traces=[{"direction": "agent_to_workflow", "raw_command": HOSTILE}],
    )
    page = client.get(admin_url(Turn, "change", turn.pk)).content.decode()
    assert HOSTILE not in page
    assert "<pre>{\n  &quot;command_name&quot;: &quot;orders/List&quot;," in page
    assert "&quot;direction&quot;: &quot;agent_to_workflow&quot;" in page
    assert page.count(ESCAPED) == 2


def test_a_hostile_topic_is_escaped_in_the_list_and_on_its_page(client, operator, member):
    conversation = ConversationFactory.create(membership=member, topic=HOSTILE, summary=HOSTILE)
    SessionBindingFactory.create(conversation=conversation, context="orders")
    for url in (
        admin_url(Conversation, "changelist"),
        admin_url(Conversation, "change", conversation.pk),
        admin_url(SessionBinding, "changelist"),
    ):
        page = client.get(url).content.decode()
        assert HOSTILE not in page, url
        assert ESCAPED in page, url


@pytest.mark.parametrize("model", [Conversation, Turn, SessionBinding])
def test_nothing_can_be_added_changed_or_deleted(client, operator, member, model):
    conversation = ConversationFactory.create(membership=member, topic="Kept")
    binding = SessionBindingFactory.create(conversation=conversation)
    turn = TurnFactory.create(conversation=conversation, request="kept")
    obj: Model = {Conversation: conversation, Turn: turn, SessionBinding: binding}[model]
    assert client.get(admin_url(model, "add")).status_code == 403
    assert client.post(admin_url(model, "change", obj.pk), {"topic": "Changed"}).status_code == 403
    assert client.post(admin_url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
    post_action(client, model, "delete_selected", [obj])
    assert model.objects.filter(pk=obj.pk).exists()
    conversation.refresh_from_db()
    assert conversation.topic == "Kept"


def test_a_staff_member_with_only_the_view_permission_can_look(client, member):
    viewer = UserFactory.create(username="support", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    client.force_login(viewer)
    conversation = ConversationFactory.create(membership=member, topic="Visible")
    assert client.get(admin_url(Conversation, "changelist")).status_code == 200
    assert client.get(admin_url(Conversation, "change", conversation.pk)).status_code == 200
    assert client.get(admin_url(Turn, "changelist")).status_code == 403
