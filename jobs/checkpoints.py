"""Which checkpoint a decision answers, so that a decision applies once, to what its person saw.

A checkpoint's name is ``<kind>-<iteration>`` (``plan-0``, ``screening-1``): the iteration grows with
every decision, so no two checkpoints of a job share a name. Every answer that shows a person the
pending checkpoint (the research tools, the research page, a task's input request) records when it
was first shown. A decision names its checkpoint; one from a client that names none answers the last
checkpoint shown before its request arrived, so neither a burst of the same call sent at once nor a
retry after the worker answering it died can land on a checkpoint that came after it, unseen. (A
retry whose first answer was produced and then lost in transit is the one case left: the showing is
recorded just before an answer leaves, to keep that window to the answer's own delivery.)
"""

from __future__ import annotations

import re
import time

from django.db import transaction

from jobs.models import CHECKPOINT_KIND_MAX_CHARS, Job, JobState

# When each of the job's latest checkpoints was first shown: [[name, unix seconds], ...].
SHOWN_KEPT = 20
CHECKPOINT_NAME_MAX_CHARS = CHECKPOINT_KIND_MAX_CHARS + 11
_NAME = re.compile(r"(?P<kind>[a-z][a-z0-9_]*)-(?P<iteration>[0-9]{1,10})")


def checkpoint_name(*, kind: str, iteration: int) -> str:
    return f"{kind}-{iteration}"


def checkpoint_pending(job: Job) -> str | None:
    """The name of the checkpoint the job waits at, or None while it runs or once it finished."""
    if job.state != JobState.WAITING or not job.checkpoint_kind:
        return None
    return checkpoint_name(kind=job.checkpoint_kind, iteration=job.iteration)


def checkpoint_parse(name: str) -> tuple[str, int] | None:
    """(kind, iteration) of a well-formed name, else None."""
    match = _NAME.fullmatch(name) if len(name) <= CHECKPOINT_NAME_MAX_CHARS else None
    return (match["kind"], int(match["iteration"])) if match else None


def checkpoint_shown(*, job: Job, at: float | None = None) -> None:
    """Record that the job's pending checkpoint is being shown to its person. Called as late as
    possible, just before the answer that shows it leaves; the first showing counts, later ones
    write nothing."""
    name = checkpoint_pending(job)
    if name is None or name in _shown(job.checkpoints_shown):
        return
    when = time.time() if at is None else at
    with transaction.atomic():
        locked = Job.objects.select_for_update().only("checkpoints_shown").get(pk=job.pk)
        shown = list(locked.checkpoints_shown or []) if isinstance(locked.checkpoints_shown, list) else []
        if name not in _shown(shown):
            shown = [*shown, [name, when]][-SHOWN_KEPT:]
            Job.objects.filter(pk=job.pk).update(checkpoints_shown=shown)
    job.checkpoints_shown = shown


def checkpoint_shown_before(*, job: Job, arrived: float) -> str | None:
    """The last checkpoint first shown to the job's person before ``arrived``, or None."""
    earlier = [name for name, at in _shown(job.checkpoints_shown).items() if at <= arrived]
    return earlier[-1] if earlier else None


def _shown(entries: object) -> dict[str, float]:
    """name -> when first shown, oldest first; malformed entries are left out."""
    shown: dict[str, float] = {}
    for entry in entries if isinstance(entries, list) else []:
        if (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and isinstance(entry[1], int | float)
        ):
            shown.setdefault(entry[0], float(entry[1]))
    return shown
