"""Binding a session to a person's conversation, rotating to a new one with a unique topic, listing
and activating: always the caller's own conversations in the caller's tenant."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection
from django.utils import timezone

from conversations.models import (
    BINDING_KEY_MAX_CHARS,
    TOPIC_MAX_CHARS,
    Conversation,
    SessionBinding,
    TurnKind,
)
from conversations.selectors import (
    CONVERSATION_NOT_FOUND,
    INITIALIZE_FIRST,
    binding_get,
    binding_key,
    conversation_turn_digest,
    conversations_list,
    topic_key_of,
)
from conversations.services import (
    BINDING_NOT_YOURS,
    CONTEXT_TOO_LONG,
    UNTITLED_TOPIC,
    binding_set_context,
    conversation_activate,
    conversation_initialize,
    conversation_rotate,
    turn_record,
)
from core.errors import InvalidInput, NotFound, PermissionDenied
from tests.support.factories import ConversationFactory, MembershipFactory, TenantFactory, TurnFactory

pytestmark = pytest.mark.django_db

KEY = "session:abc"


def _initialize(
    membership, *, key: str = KEY, conversation_id: uuid.UUID | None = None, context: str = "orders"
):
    return conversation_initialize(
        key=key,
        user_id=membership.user_id,
        tenant_id=membership.tenant_id,
        client_id="claude",
        conversation_id=conversation_id,
        first_context=context,
    )


def _rotate(membership, *, topic: str, summary: str = "What was done.", key: str = KEY) -> Conversation:
    return conversation_rotate(
        key=key,
        user_id=membership.user_id,
        tenant_id=membership.tenant_id,
        topic=topic,
        summary=summary,
        derived=False,
    )


# Binding keys


def test_a_handshake_session_is_its_own_key():
    assert binding_key(session_id="s1", user_id=1, tenant_id=2, client_id="c") == "session:s1"


def test_without_a_session_the_person_s_client_in_the_tenant_is_the_key():
    assert binding_key(session_id=None, user_id=1, tenant_id=2, client_id="c") == "client:1:2:c"
    assert binding_key(session_id="", user_id=1, tenant_id=2, client_id="c") == "client:1:2:c"


def test_a_key_too_long_for_the_column_is_hashed_and_never_equals_a_plain_one():
    long_client = "https://client.example/" + "x" * 500
    key = binding_key(session_id=None, user_id=1, tenant_id=2, client_id=long_client)
    other = binding_key(session_id=None, user_id=1, tenant_id=2, client_id=long_client + "y")
    assert len(key) <= BINDING_KEY_MAX_CHARS
    assert key.startswith("client-sha256:1:2:")
    assert key != other
    assert (
        len(binding_key(session_id="s" * 400, user_id=1, tenant_id=2, client_id="c")) <= BINDING_KEY_MAX_CHARS
    )


def test_a_client_id_with_a_lone_surrogate_still_makes_a_key():
    key = binding_key(session_id=None, user_id=1, tenant_id=2, client_id="\ud800" * 400)
    assert key.startswith("client-sha256:")


# initialize


def test_a_first_initialize_starts_a_conversation_and_binds_the_session(member):
    binding = _initialize(member)
    conversation = binding.conversation
    assert conversation is not None
    assert (conversation.user_id, conversation.tenant_id, conversation.client_id) == (
        member.user_id,
        member.tenant_id,
        "claude",
    )
    assert (binding.key, binding.context) == (KEY, "orders")


def test_initialize_is_idempotent(member):
    first = _initialize(member)
    second = _initialize(member, context="customers")
    assert second.conversation_id == first.conversation_id
    assert Conversation.objects.count() == 1
    # The context a session has moved to is not reset by a second initialize.
    assert second.context == "orders"


def test_initialize_resumes_the_person_s_most_recently_updated_conversation_here(member):
    older = ConversationFactory.create(membership=member, updated=timezone.now() - timedelta(days=2))
    newer = ConversationFactory.create(membership=member, updated=timezone.now() - timedelta(days=1))
    assert older.pk != newer.pk
    assert _initialize(member).conversation_id == newer.pk


def test_initialize_ignores_the_same_person_s_conversations_in_another_tenant(member):
    elsewhere = MembershipFactory.create(user=member.user, tenant=TenantFactory.create())
    ConversationFactory.create(membership=elsewhere)
    binding = _initialize(member)
    assert binding.conversation is not None
    assert binding.conversation.tenant_id == member.tenant_id


def test_initialize_binds_a_named_conversation_of_the_person(member):
    named = ConversationFactory.create(membership=member, updated=timezone.now() - timedelta(days=3))
    ConversationFactory.create(membership=member)
    assert _initialize(member, conversation_id=named.pk).conversation_id == named.pk


@pytest.mark.parametrize("whose", ["another person", "another tenant", "nobody"])
def test_a_named_conversation_that_is_not_the_person_s_here_falls_back_to_their_own(member, outsider, whose):
    mine = ConversationFactory.create(membership=member)
    named = {
        "another person": lambda: ConversationFactory.create(membership=outsider).pk,
        "another tenant": lambda: (
            ConversationFactory.create(
                membership=MembershipFactory.create(user=member.user, tenant=outsider.tenant)
            ).pk
        ),
        "nobody": uuid.uuid4,
    }[whose]()
    assert _initialize(member, conversation_id=named).conversation_id == mine.pk


def test_a_session_bound_to_someone_else_is_refused(member, outsider):
    _initialize(outsider)
    with pytest.raises(PermissionDenied, match=BINDING_NOT_YOURS):
        _initialize(member)
    assert SessionBinding.objects.get(key=KEY).user_id == outsider.user_id


def test_a_hostile_client_id_is_kept_bounded_and_visible(member):
    conversation = conversation_initialize(
        key=KEY,
        user_id=member.user_id,
        tenant_id=member.tenant_id,
        client_id="c\x00\ud800" + "x" * 1000,
        conversation_id=None,
        first_context="orders",
    ).conversation
    assert conversation is not None
    conversation.refresh_from_db()
    assert conversation.client_id.startswith("c\\u0000\\ud800x")
    assert len(conversation.client_id) == 255


def test_past_a_thousand_namesakes_a_topic_gets_a_random_suffix(member):
    ConversationFactory.create(membership=member, topic="Sales", topic_key="sales")
    for n in range(2, 1000):
        ConversationFactory.create(membership=member, topic=f"Sales ({n})", topic_key=f"sales({n})")
    current = _initialize(
        member, conversation_id=ConversationFactory.create(membership=member).pk
    ).conversation
    _rotate(member, topic="SALES")
    current.refresh_from_db()
    assert current.topic.startswith("SALES (")
    assert current.topic_key not in {"sales", *(f"sales({n})" for n in range(2, 1000))}


def test_a_binding_with_no_context_gets_the_first_one(member):
    _initialize(member, context="")
    assert _initialize(member, context="customers").context == "customers"


@pytest.mark.parametrize("context", ["x" * 64, "or\x00ders", "\udc00"])
def test_an_unstorable_or_overlong_first_context_is_invalid_input(member, context):
    with pytest.raises(InvalidInput):
        _initialize(member, context=context)
    assert not SessionBinding.objects.exists()


def test_binding_get_returns_only_the_caller_s_binding(member, outsider):
    _initialize(member)
    assert binding_get(key=KEY, user_id=member.user_id, tenant_id=member.tenant_id) is not None
    assert binding_get(key=KEY, user_id=outsider.user_id, tenant_id=outsider.tenant_id) is None
    assert binding_get(key=KEY, user_id=member.user_id, tenant_id=outsider.tenant_id) is None
    assert binding_get(key="session:unknown", user_id=member.user_id, tenant_id=member.tenant_id) is None


def test_binding_set_context_moves_the_session_and_refuses_what_cannot_be_kept(member):
    _initialize(member)
    binding_set_context(key=KEY, context="customers")
    assert SessionBinding.objects.get(key=KEY).context == "customers"
    with pytest.raises(InvalidInput, match=CONTEXT_TOO_LONG):
        binding_set_context(key=KEY, context="c" * 1000)
    with pytest.raises(InvalidInput, match="NUL"):
        binding_set_context(key=KEY, context="a\x00")
    with pytest.raises(NotFound, match=INITIALIZE_FIRST):
        binding_set_context(key="session:none", context="orders")


# Rotation and topics


def test_rotate_titles_the_current_conversation_and_binds_a_new_one(member):
    current = _initialize(member).conversation
    fresh = _rotate(member, topic="  Sales\n by   region ", summary="Looked at sales.")
    current.refresh_from_db()
    assert (current.topic, current.topic_key, current.summary) == (
        "Sales by region",
        "salesbyregion",
        "Looked at sales.",
    )
    assert current.summary_derived is False
    assert fresh.pk != current.pk
    assert (fresh.user_id, fresh.tenant_id, fresh.topic, fresh.client_id) == (
        member.user_id,
        member.tenant_id,
        "",
        "claude",
    )
    assert SessionBinding.objects.get(key=KEY).conversation_id == fresh.pk


def test_a_derived_summary_is_marked_so(member):
    current = _initialize(member).conversation
    conversation_rotate(
        key=KEY, user_id=member.user_id, tenant_id=member.tenant_id, topic="T", summary="S", derived=True
    )
    current.refresh_from_db()
    assert current.summary_derived is True


def test_rotate_without_initialize_is_not_found(member):
    with pytest.raises(NotFound, match="Call initialize first"):
        _rotate(member, topic="Sales")


def test_another_person_cannot_rotate_a_session_that_is_not_theirs(member, outsider):
    current = _initialize(member).conversation
    with pytest.raises(NotFound, match="Call initialize first"):
        _rotate(outsider, topic="Mine now")
    current.refresh_from_db()
    assert current.topic == ""


def test_topics_are_unique_per_person_ignoring_case_and_spaces(member):
    _initialize(member)
    for topic in ("Sales report", "sales REPORT", "S a l e s report"):
        _rotate(member, topic=topic)
    topics = sorted(Conversation.objects.exclude(topic="").values_list("topic", flat=True))
    assert topics == ["S a l e s report (3)", "Sales report", "sales REPORT (2)"]
    assert len({topic_key_of(t) for t in topics}) == 3


def test_the_same_topic_is_free_for_another_person(member, outsider):
    _initialize(member)
    _initialize(outsider, key="session:other")
    _rotate(member, topic="Sales")
    _rotate(outsider, topic="Sales", key="session:other")
    assert sorted(Conversation.objects.exclude(topic="").values_list("topic", flat=True)) == [
        "Sales",
        "Sales",
    ]


def test_topics_are_unique_across_the_person_s_tenants(member):
    elsewhere = MembershipFactory.create(user=member.user, tenant=TenantFactory.create())
    _initialize(member)
    _initialize(elsewhere, key="session:elsewhere")
    _rotate(member, topic="Sales")
    _rotate(elsewhere, topic="sales", key="session:elsewhere")
    assert sorted(Conversation.objects.exclude(topic="").values_list("topic", flat=True)) == [
        "Sales",
        "sales (2)",
    ]


def test_a_suffixed_topic_still_fits_the_column(member):
    _initialize(member)
    long_topic = "t" * (TOPIC_MAX_CHARS + 50)
    _rotate(member, topic=long_topic)
    _rotate(member, topic=long_topic)
    topics = set(Conversation.objects.exclude(topic="").values_list("topic", flat=True))
    assert topics == {"t" * TOPIC_MAX_CHARS, "t" * (TOPIC_MAX_CHARS - 4) + " (2)"}


def test_a_topic_that_folds_longer_than_the_column_gets_a_bounded_distinct_key(member):
    _initialize(member)
    _rotate(member, topic="ß" * TOPIC_MAX_CHARS)
    _rotate(member, topic="ß" * (TOPIC_MAX_CHARS - 1) + "x")
    keys = list(Conversation.objects.exclude(topic="").values_list("topic_key", flat=True))
    assert len(set(keys)) == 2
    assert all(len(key) <= TOPIC_MAX_CHARS for key in keys)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [("", UNTITLED_TOPIC), ("   \n\t", UNTITLED_TOPIC), ("a\x00b", "a\\u0000b"), ("x\ud800", "x\\ud800")],
)
def test_blank_or_unstorable_topics_are_kept_visibly(member, topic, expected):
    current = _initialize(member).conversation
    _rotate(member, topic=topic, summary="s\x00" + "y" * 10_000)
    current.refresh_from_db()
    assert current.topic == expected
    assert current.summary.startswith("s\\u0000y")
    assert len(current.summary) == 4_000


def test_if_creating_the_new_conversation_fails_nothing_changes(member):
    current = _initialize(member).conversation
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION refuse_conversation() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused for the test'; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER refuse_conversation BEFORE INSERT ON {Conversation._meta.db_table} "
            "FOR EACH ROW EXECUTE FUNCTION refuse_conversation()"
        )
    with pytest.raises(DatabaseError, match="refused for the test"):
        _rotate(member, topic="Sales")
    current.refresh_from_db()
    assert (current.topic, current.topic_key, current.summary) == ("", "", "")
    assert Conversation.objects.count() == 1
    assert SessionBinding.objects.get(key=KEY).conversation_id == current.pk


# Listing and activating


def test_the_list_is_the_person_s_own_in_this_tenant_newest_first(member, outsider):
    now = timezone.now()
    old = ConversationFactory.create(membership=member, updated=now - timedelta(days=2))
    new = ConversationFactory.create(membership=member, updated=now - timedelta(days=1))
    ConversationFactory.create(membership=outsider)
    ConversationFactory.create(membership=MembershipFactory.create(user=member.user, tenant=outsider.tenant))
    listed = conversations_list(user_id=member.user_id, tenant_id=member.tenant_id, limit=10)
    assert [c.pk for c in listed] == [new.pk, old.pk]


@pytest.mark.parametrize(("limit", "expected"), [(0, 1), (-5, 1), (2, 2), (10**9, 3)])
def test_the_list_limit_is_clamped(member, limit, expected):
    for _ in range(3):
        ConversationFactory.create(membership=member)
    assert (
        len(conversations_list(user_id=member.user_id, tenant_id=member.tenant_id, limit=limit)) == expected
    )


def test_activate_binds_another_conversation_of_the_person(member):
    _initialize(member)
    other = ConversationFactory.create(membership=member, updated=timezone.now() - timedelta(days=9))
    activated = conversation_activate(
        key=KEY, user_id=member.user_id, tenant_id=member.tenant_id, conversation_id=other.pk
    )
    assert activated.pk == other.pk
    assert SessionBinding.objects.get(key=KEY).conversation_id == other.pk


@pytest.mark.parametrize("whose", ["another person", "another tenant", "nobody"])
def test_activating_anything_but_one_s_own_is_not_found_alike(member, outsider, whose):
    bound = _initialize(member).conversation_id
    target = {
        "another person": lambda: ConversationFactory.create(membership=outsider).pk,
        "another tenant": lambda: (
            ConversationFactory.create(
                membership=MembershipFactory.create(user=member.user, tenant=outsider.tenant)
            ).pk
        ),
        "nobody": uuid.uuid4,
    }[whose]()
    with pytest.raises(NotFound) as refused:
        conversation_activate(
            key=KEY, user_id=member.user_id, tenant_id=member.tenant_id, conversation_id=target
        )
    assert refused.value.message == CONVERSATION_NOT_FOUND
    assert refused.value.jsonrpc_code == -32002
    assert SessionBinding.objects.get(key=KEY).conversation_id == bound


def test_activate_without_initialize_is_not_found(member):
    mine = ConversationFactory.create(membership=member)
    with pytest.raises(NotFound, match="Call initialize first"):
        conversation_activate(
            key=KEY, user_id=member.user_id, tenant_id=member.tenant_id, conversation_id=mine.pk
        )


# Turns


def test_a_turn_is_written_whole_and_bumps_its_conversation(member):
    conversation = ConversationFactory.create(membership=member, updated=timezone.now() - timedelta(days=1))
    turn = turn_record(
        conversation_id=conversation.pk,
        kind=TurnKind.AGENT,
        request="Show the top customers",
        output={"success": True, "command_name": "customers/Top"},
        traces=[{"direction": "agent_to_workflow", "raw_command": "customers/Top"}],
        success=True,
        duration_ms=42.0,
    )
    turn.refresh_from_db()
    conversation.refresh_from_db()
    assert (turn.kind, turn.request, turn.success, turn.duration_ms) == (
        "agent",
        "Show the top customers",
        True,
        42.0,
    )
    assert turn.output["command_name"] == "customers/Top"
    assert turn.traces[0]["direction"] == "agent_to_workflow"
    assert conversation.updated == turn.created


def test_a_turn_for_an_unknown_conversation_is_not_found_and_writes_nothing():
    with pytest.raises(NotFound):
        turn_record(
            conversation_id=uuid.uuid4(),
            kind="command",
            request="x",
            output={},
            traces=[],
            success=False,
            duration_ms=1.0,
        )


def test_an_unknown_turn_kind_is_invalid_input(member):
    conversation = ConversationFactory.create(membership=member)
    with pytest.raises(InvalidInput, match="agent, assistant, command"):
        turn_record(
            conversation_id=conversation.pk,
            kind="shell",
            request="x",
            output={},
            traces=[],
            success=True,
            duration_ms=1,
        )
    assert not conversation.turns.exists()


def test_a_hostile_turn_is_kept_visibly_never_refused(member):
    conversation = ConversationFactory.create(membership=member)
    deep: list = []
    for _ in range(500):
        deep = [deep]
    turn = turn_record(
        conversation_id=conversation.pk,
        kind="command",
        request="a\x00b\ud800" + "r" * 20_000,
        output={
            "k\x00": "v\udfff",
            "nan": float("nan"),
            "inf": float("-inf"),
            "when": timezone.now(),
            "deep": deep,
        },
        traces=[{"parameters": {"x": "\x00"}}],
        success=True,
        duration_ms=float("nan"),
    )
    turn.refresh_from_db()
    assert turn.request.startswith("a\\u0000b\\ud800r")
    assert len(turn.request) == 8_000
    assert turn.output["k\\u0000"] == "v\\udfff"
    assert (turn.output["nan"], turn.output["inf"]) == (None, None)
    assert isinstance(turn.output["when"], str)
    assert "nested deeper" in str(turn.output["deep"])
    assert turn.traces == [{"parameters": {"x": "\\u0000"}}]
    assert turn.duration_ms == 0.0


def test_the_digest_is_the_newest_fifty_turns_in_reading_order(member):
    conversation = ConversationFactory.create(membership=member)
    start = timezone.now() - timedelta(hours=1)
    for n in range(55):
        TurnFactory.create(
            conversation=conversation,
            request=f"request {n}",
            created=start + timedelta(seconds=n),
            output={"command_name": f"orders/C{n}"} if n % 2 else {"no": "name"},
            success=n % 3 == 0,
        )
    TurnFactory.create(conversation=ConversationFactory.create(membership=member), request="elsewhere")
    digest = conversation_turn_digest(conversation_id=conversation.pk)
    assert len(digest) == 50
    assert digest[0] == {
        "kind": "command",
        "request": "request 5",
        "command_name": "orders/C5",
        "success": False,
    }
    assert digest[1]["command_name"] == ""
    assert digest[-1]["request"] == "request 54"


def test_the_digest_of_an_unknown_conversation_is_empty():
    assert conversation_turn_digest(conversation_id=uuid.uuid4()) == []
