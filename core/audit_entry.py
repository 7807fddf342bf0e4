"""One audit event on its way to the trail: what ``core.audit`` writes and ``core.metrics`` counts.

Its own module because both need it and ``core.audit`` feeds ``core.metrics``: with the class in
``core.audit``, the two would import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from core.models import AuditOutcome


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
