"""One audit event on its way to the trail: what ``core.audit.trail`` writes and ``core.metrics`` counts.

Its own module because both need it and ``core.audit.trail`` feeds ``core.metrics``: with the class in
``core.audit.trail``, the two would import each other.

``entry_storable`` is the one place an entry is made fit for its row, whatever the input: every
text value and the whole ``detail`` pass through ``core.text_safety.storable_text`` (NUL and unpaired
surrogates escaped as ``\\u0000``, ``\\ud800``), and text is cut to its column's length. An entry
that needed escaping says so in its own row: ``detail["sanitized"]`` lists the fields changed.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from core.models import AuditOutcome
from core.text_safety import storable_text

SANITIZED_KEY = "sanitized"
# Deeper than any detail we write ourselves; a note nested deeper is cut, not refused.
_MAX_DEPTH = 32
# The text columns of AuditEvent and their lengths: a longer value would fail the whole INSERT.
_TEXT_COLUMNS = {
    "action": 40,
    "outcome": 10,
    "username": 150,
    "client_id": 255,
    "session_id": 64,
    "request_id": 128,
    "target": 500,
}


@dataclass(frozen=True, slots=True)
class AuditEntry:
    action: str
    outcome: str = AuditOutcome.OK
    tenant_id: int | None = None
    tenant_slug: str = ""
    user_id: int | None = None
    username: str = ""
    application_id: int | None = None
    client_id: str = ""
    session_id: str = ""
    request_id: str = ""
    ip: str | None = None
    target: str = ""
    duration_ms: float | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    created: datetime = field(default_factory=timezone.now)
    # Names the event wherever it travels (spool file, retried INSERT): written twice, stored once.
    event_id: uuid.UUID = field(default_factory=uuid.uuid4)


def entry_storable(entry: AuditEntry) -> AuditEntry:
    """``entry`` with every value the database could refuse made storable (see the module doc)."""
    changes: dict[str, Any] = {}
    sanitized: list[str] = []
    for name, length in _TEXT_COLUMNS.items():
        value = str(getattr(entry, name) or "")
        safe, changed = storable_text(value)
        if changed:
            sanitized.append(name)
        if changed or len(safe) > length:
            changes[name] = safe[:length]
    if entry.ip is not None and storable_text(entry.ip)[1]:
        changes["ip"] = None
        sanitized.append("ip")
    detail, detail_changed = _json_storable(entry.detail, depth=0)
    if detail_changed:
        sanitized.append("detail")
    if sanitized:
        detail = {**detail, SANITIZED_KEY: sanitized}
    return dataclasses.replace(entry, detail=detail, **changes)


def _json_storable(value: Any, *, depth: int) -> tuple[Any, bool]:
    """JSON-like ``value`` rebuilt so that ``jsonb`` accepts it, and whether anything the caller
    wrote had to change: text made storable, NaN and infinities (which JSON cannot carry) and keys
    that are not text written as text, nesting past ``_MAX_DEPTH`` cut. Objects JSON does not know
    are written as their text, as ``json.dumps(default=str)`` did (not counted as a change)."""
    if isinstance(value, str):
        return storable_text(value)
    if value is None or isinstance(value, bool | int):
        return value, False
    if isinstance(value, float):
        return (value, False) if math.isfinite(value) else (str(value), True)
    if depth >= _MAX_DEPTH:
        return "…", True
    if isinstance(value, Mapping):
        changed = False
        out: dict[str, Any] = {}
        for key, item in value.items():
            new_key, key_changed = storable_text(key if isinstance(key, str) else str(key))
            out[new_key], item_changed = _json_storable(item, depth=depth + 1)
            changed = changed or key_changed or item_changed
        return out, changed
    if isinstance(value, list | tuple):
        items = [_json_storable(item, depth=depth + 1) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    return storable_text(str(value))[0], False
