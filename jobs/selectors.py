"""Reading jobs: always the caller's own, in the caller's tenant.

Another person's job, another tenant's, a malformed id and an unknown one all raise the same
``JobNotFound``.
"""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from jobs.errors import JobNotFound
from jobs.models import Job, JobDecision

LIST_LIMIT_MAX = 200


def job_id_parse(*, job_id: object) -> uuid.UUID:
    """``job_id`` as a UUID, or ``JobNotFound`` (a malformed id is just an unknown one)."""
    if isinstance(job_id, uuid.UUID):
        return job_id
    if not isinstance(job_id, str) or len(job_id) > 64:
        raise JobNotFound(job_id="(malformed)")
    try:
        return uuid.UUID(job_id)
    except ValueError:
        raise JobNotFound(job_id=job_id.encode("ascii", "backslashreplace").decode()) from None


def jobs_of(*, tenant_id: int, user_id: int) -> QuerySet[Job]:
    return Job.objects.filter(tenant_id=tenant_id, user_id=user_id)


def job_get(*, tenant_id: int, user_id: int, job_id: object, for_update: bool = False) -> Job:
    parsed = job_id_parse(job_id=job_id)
    queryset = jobs_of(tenant_id=tenant_id, user_id=user_id)
    if for_update:
        queryset = queryset.select_for_update()
    job = queryset.filter(pk=parsed).first()
    if job is None:
        raise JobNotFound(job_id=parsed)
    return job


def job_list(*, tenant_id: int, user_id: int, kind: str | None = None, limit: int = 50) -> list[Job]:
    queryset = jobs_of(tenant_id=tenant_id, user_id=user_id)
    if kind is not None:
        queryset = queryset.filter(kind=kind)
    return list(queryset.order_by("-created")[: max(1, min(limit, LIST_LIMIT_MAX))])


def job_decisions(*, job: Job) -> list[JobDecision]:
    return list(JobDecision.objects.filter(job=job).select_related("user").order_by("created", "id"))
