"""Writing conversations: binding a session to one, rotating to a new one, recording turns and
feedback, and the lock that lets one turn at a time run in a session, across workers.

Every function is synchronous ORM work; the MCP tools call them through ``core.db.db_call``.
Each change that touches two rows (a topic and the new conversation, a turn and its
conversation's ``updated``) happens in one transaction, so a failure leaves nothing half done.

Races are settled by the database, never by a process: a binding row locked ``FOR UPDATE``, a
primary key or the per-person topic constraint refusing the second writer (who then retries and
sees the first one's work), and the turn lock taken by a single conditional ``UPDATE``, which
PostgreSQL and SQLite both apply atomically.
"""

from __future__ import annotations

import math
import secrets
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.models import (
    CONTEXT_MAX_CHARS,
    FEEDBACK_MAX_CHARS,
    REQUEST_MAX_CHARS,
    SUMMARY_MAX_CHARS,
    TOPIC_MAX_CHARS,
    Conversation,
    SessionBinding,
    Turn,
    TurnKind,
)
from conversations.selectors import (
    CONVERSATION_NOT_FOUND,
    INITIALIZE_FIRST,
    conversation_get,
    topic_key_of,
)
from core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from core.json_bounds import MAX_JSON_DEPTH
from core.text_safety import storable_text, text_unstorable_reason

BINDING_NOT_YOURS = "This session is bound to another person or tenant; open a new session."
CONTEXT_TOO_LONG = f"A context name has at most {CONTEXT_MAX_CHARS} characters."
FEEDBACK_MISSING = "Give binary_or_numeric_score or nl_feedback (or both)."
FEEDBACK_NO_TURN = "The active conversation has no turn yet to give feedback on."
FEEDBACK_SCORE_NOT_FINITE = "binary_or_numeric_score must be a finite number or a boolean."
FEEDBACK_TOO_LONG = f"nl_feedback has at most {FEEDBACK_MAX_CHARS} characters."
TOPIC_RACE_LOST = "Another conversation of yours took this topic at the same moment; try again."
TURN_KIND_UNKNOWN = "A turn's kind is one of: {kinds}."
UNTITLED_TOPIC = "Untitled conversation"
T = TypeVar("T")
TOO_DEEP = f"(nested deeper than {MAX_JSON_DEPTH} levels; not kept)"

# A race lost (two first initializes, two rotations picking the same topic) is retried this many
# times; each retry sees the winner's committed row, so a second attempt nearly always succeeds.
RACE_ATTEMPTS = 3
# Past " (999)" counting further is not worth the search.
TOPIC_SUFFIX_MAX = 1000
# Enough of a topic key to find every suffixed variant in one query (a suffix never shortens a
# topic below 190 characters, so the first 32 of its key never change).
TOPIC_KEY_PREFIX_CHARS = 32


def _binding_locked(*, key: str, user_id: int, tenant_id: int) -> SessionBinding:
    binding = (
        SessionBinding.objects.select_for_update()
        .filter(key=key, user_id=user_id, tenant_id=tenant_id)
        .first()
    )
    if binding is None:
        raise NotFound(INITIALIZE_FIRST)
    return binding


def _context_check(context: str) -> None:
    if len(context) > CONTEXT_MAX_CHARS:
        raise InvalidInput(CONTEXT_TOO_LONG)
    reason = text_unstorable_reason(context)
    if reason is not None:
        raise InvalidInput(f"The context name {reason}.")


def conversation_initialize(
    *,
    key: str,
    user_id: int,
    tenant_id: int,
    client_id: str,
    conversation_id: uuid.UUID | None,
    first_context: str,
    session_id: str | None = None,
) -> SessionBinding:
    """Bind ``key`` to the person's active conversation: the named one if it is theirs in this
    tenant, else their most recently updated one here, else a new one. Safe to repeat, and two
    concurrent calls for one key end on the same conversation."""
    _context_check(first_context)
    # A lost race: another call created the binding first; the next attempt locks and reuses it.
    return _atomic_retried(
        lambda: _initialize(
            key=key,
            user_id=user_id,
            tenant_id=tenant_id,
            client_id=client_id,
            conversation_id=conversation_id,
            first_context=first_context,
            session_id=session_id,
        )
    )


def _atomic_retried(work: Callable[[], T], *, exhausted: Exception | None = None) -> T:
    """``work`` in a transaction, tried again (up to ``RACE_ATTEMPTS`` in all) when a concurrent
    writer made it break a unique constraint; then ``exhausted`` is raised, or the IntegrityError."""
    for attempt in range(1, RACE_ATTEMPTS + 1):
        try:
            with transaction.atomic():
                return work()
        except IntegrityError:
            if attempt == RACE_ATTEMPTS:
                if exhausted is None:
                    raise
                raise exhausted from None
    raise AssertionError("unreachable")


def _initialize(
    *,
    key: str,
    user_id: int,
    tenant_id: int,
    client_id: str,
    conversation_id: uuid.UUID | None,
    first_context: str,
    session_id: str | None,
) -> SessionBinding:
    # Locked first, so that two calls on one existing binding pick (or create) in turn.
    binding = SessionBinding.objects.select_for_update().filter(key=key).first()
    if binding is not None and (binding.user_id, binding.tenant_id) != (user_id, tenant_id):
        raise PermissionDenied(BINDING_NOT_YOURS)
    mine = Conversation.objects.filter(user_id=user_id, tenant_id=tenant_id)
    conversation = mine.filter(pk=conversation_id).first() if conversation_id is not None else None
    if conversation is None:
        conversation = mine.order_by("-updated", "-created").first()
    if conversation is None:
        conversation = Conversation.objects.create(
            user_id=user_id, tenant_id=tenant_id, client_id=storable_text(client_id)[0][:255]
        )
    now = timezone.now()
    if binding is None:
        # A plain INSERT: a concurrent first call makes it fail (IntegrityError) and retry.
        return SessionBinding.objects.create(
            key=key,
            user_id=user_id,
            tenant_id=tenant_id,
            session_id=session_id,
            conversation=conversation,
            context=first_context,
            created=now,
            updated=now,
        )
    binding.conversation = conversation
    binding.context = binding.context or first_context
    binding.updated = now
    binding.save(update_fields=["conversation", "context", "updated"])
    return binding


def _topic_clean(topic: str) -> str:
    # One line, visible characters only: a topic is shown in lists and compared ignoring spaces.
    topic = storable_text(" ".join(topic.split()))[0][:TOPIC_MAX_CHARS].rstrip()
    return topic or UNTITLED_TOPIC


def _topic_unique(*, user_id: int, topic: str, exclude: uuid.UUID) -> str:
    """``topic``, or the first of "topic (2)", "topic (3)"... that no other conversation of the
    person has (ignoring case and spaces), still within the column."""
    prefix = topic_key_of(topic)[:TOPIC_KEY_PREFIX_CHARS]
    taken = set(
        Conversation.objects.filter(user_id=user_id, topic_key__startswith=prefix)
        .exclude(pk=exclude)
        .values_list("topic_key", flat=True)
    )
    if topic_key_of(topic) not in taken:
        return topic
    for n in range(2, TOPIC_SUFFIX_MAX):
        suffix = f" ({n})"
        candidate = topic[: TOPIC_MAX_CHARS - len(suffix)].rstrip() + suffix
        if topic_key_of(candidate) not in taken:
            return candidate
    # A thousand namesakes: stop counting; a random suffix is as good as unique (and the
    # constraint still backs it).
    suffix = f" ({secrets.token_hex(4)})"
    return topic[: TOPIC_MAX_CHARS - len(suffix)].rstrip() + suffix


def conversation_rotate(
    *, key: str, user_id: int, tenant_id: int, topic: str, summary: str, derived: bool
) -> Conversation:
    """Give the binding's conversation its topic (unique for the person) and summary, and move the
    binding to a new conversation, which is returned. All or nothing."""
    topic = _topic_clean(topic)
    summary = storable_text(summary.strip())[0][:SUMMARY_MAX_CHARS]
    # A lost race: another conversation of the person took the same topic key between our check
    # and our write (conversation_topic_unique); the next attempt sees it and adds a suffix.
    return _atomic_retried(
        lambda: _rotate(
            key=key, user_id=user_id, tenant_id=tenant_id, topic=topic, summary=summary, derived=derived
        ),
        exhausted=Conflict(TOPIC_RACE_LOST, retry_after_seconds=1),
    )


def _rotate(
    *, key: str, user_id: int, tenant_id: int, topic: str, summary: str, derived: bool
) -> Conversation:
    binding = _binding_locked(key=key, user_id=user_id, tenant_id=tenant_id)
    current = (
        Conversation.objects.select_for_update().filter(pk=binding.conversation_id).first()
        if binding.conversation_id is not None
        else None
    )
    client_id = ""
    if current is not None:
        current.topic = _topic_unique(user_id=user_id, topic=topic, exclude=current.pk)
        current.topic_key = topic_key_of(current.topic)
        current.summary = summary
        current.summary_derived = derived
        current.save(update_fields=["topic", "topic_key", "summary", "summary_derived"])
        client_id = current.client_id
    fresh = Conversation.objects.create(user_id=user_id, tenant_id=tenant_id, client_id=client_id)
    binding.conversation = fresh
    binding.updated = timezone.now()
    binding.save(update_fields=["conversation", "updated"])
    return fresh


def conversation_activate(
    *, key: str, user_id: int, tenant_id: int, conversation_id: uuid.UUID
) -> Conversation:
    """Make another of the person's conversations in this tenant the binding's active one."""
    with transaction.atomic():
        binding = _binding_locked(key=key, user_id=user_id, tenant_id=tenant_id)
        conversation = conversation_get(user_id=user_id, tenant_id=tenant_id, conversation_id=conversation_id)
        binding.conversation = conversation
        binding.updated = timezone.now()
        binding.save(update_fields=["conversation", "updated"])
    return conversation


def binding_set_context(*, key: str, context: str) -> None:
    _context_check(context)
    if not SessionBinding.objects.filter(key=key).update(context=context, updated=timezone.now()):
        raise NotFound(INITIALIZE_FIRST)


def _json_kept(value: Any, depth: int = 0) -> Any:
    """``value`` as the database can keep it: strings made storable, NaN and infinities (which
    jsonb refuses) as null, other objects as text, and nesting past the bound replaced by a note.
    A turn is a record of what happened: it is kept, never refused."""
    if isinstance(value, str):
        return storable_text(value)[0]
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= MAX_JSON_DEPTH:
        return TOO_DEEP if isinstance(value, (dict, list, tuple)) else storable_text(str(value))[0]
    if isinstance(value, dict):
        return {storable_text(str(k))[0]: _json_kept(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_kept(item, depth + 1) for item in value]
    return storable_text(str(value))[0]


def turn_record(
    *,
    conversation_id: uuid.UUID,
    kind: str,
    request: str,
    output: dict[str, Any],
    traces: list[Any],
    success: bool,
    duration_ms: float,
) -> Turn:
    """Write a finished turn whole and mark its conversation as updated, in one transaction."""
    if kind not in TurnKind.values:
        raise InvalidInput(TURN_KIND_UNKNOWN.format(kinds=", ".join(TurnKind.values)))
    kept_output = _json_kept(output)
    kept_traces = _json_kept(traces)
    duration = float(duration_ms) if math.isfinite(duration_ms) and duration_ms >= 0 else 0.0
    with transaction.atomic():
        now = timezone.now()
        if not Conversation.objects.filter(pk=conversation_id).update(updated=now):
            raise NotFound(CONVERSATION_NOT_FOUND)
        return Turn.objects.create(
            conversation_id=conversation_id,
            kind=kind,
            request=storable_text(request)[0][:REQUEST_MAX_CHARS],
            output=kept_output if isinstance(kept_output, dict) else {"value": kept_output},
            traces=kept_traces if isinstance(kept_traces, list) else [kept_traces],
            success=bool(success),
            duration_ms=duration,
            created=now,
        )


def _feedback_score(score: float | bool | None) -> float | None:
    if score is None:
        return None
    if isinstance(score, bool):
        return 1.0 if score else 0.0
    if not isinstance(score, (int, float)):
        raise InvalidInput(FEEDBACK_SCORE_NOT_FINITE)
    try:
        value = float(score)
    except OverflowError:  # an int too large for a float
        raise InvalidInput(FEEDBACK_SCORE_NOT_FINITE) from None
    if not math.isfinite(value):
        raise InvalidInput(FEEDBACK_SCORE_NOT_FINITE)
    return value


def _feedback_text(text: str | None) -> str | None:
    if text is None or not text.strip():
        return None
    if len(text) > FEEDBACK_MAX_CHARS:
        raise InvalidInput(FEEDBACK_TOO_LONG)
    reason = text_unstorable_reason(text)
    if reason is not None:
        raise InvalidInput(f"nl_feedback {reason}.")
    return text.strip()


def turn_feedback(
    *, key: str, user_id: int, tenant_id: int, score: float | bool | None, text: str | None
) -> Turn:
    """Attach feedback to the latest turn of the binding's active conversation. Only what is
    given is written: a comment after a score keeps the score."""
    value = _feedback_score(score)
    comment = _feedback_text(text)
    if value is None and comment is None:
        raise InvalidInput(FEEDBACK_MISSING)
    with transaction.atomic():
        binding = _binding_locked(key=key, user_id=user_id, tenant_id=tenant_id)
        turn = (
            Turn.objects.select_for_update()
            .filter(conversation_id=binding.conversation_id)
            .order_by("-created", "-id")
            .first()
            if binding.conversation_id is not None
            else None
        )
        if turn is None:
            raise NotFound(FEEDBACK_NO_TURN)
        fields = ["feedback_at"]
        if value is not None:
            turn.feedback_score = value
            fields.append("feedback_score")
        if comment is not None:
            turn.feedback_text = comment
            fields.append("feedback_text")
        turn.feedback_at = timezone.now()
        turn.save(update_fields=fields)
    return turn
