"""``core.gc_tuning.gc_settle``: what a server process holds at start is frozen out of the
collector's walks and young objects are collected less often; ``GC_GEN0_THRESHOLD=0`` leaves
Python's collector as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

import config.asgi  # noqa: F401  (the deployed application, which settles the collector at import)
from core.gc_tuning import gc_settle


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count() > 0
    yield
    gc.unfreeze()
    if frozen:
        gc.freeze()
    gc.set_threshold(*threshold)


def test_settling_freezes_what_exists_and_sets_the_young_threshold(settings) -> None:
    settings.GATEHOUSE = {**settings.GATEHOUSE, "GC_GEN0_THRESHOLD": 4321}
    gc.unfreeze()
    _, second, third = gc.get_threshold()
    kept = [object() for _ in range(10)]
    gc_settle()
    assert gc.get_threshold() == (4321, second, third)
    assert gc.get_freeze_count() > len(kept)


def test_zero_leaves_the_collector_as_python_set_it(settings) -> None:
    settings.GATEHOUSE = {**settings.GATEHOUSE, "GC_GEN0_THRESHOLD": 0}
    gc.unfreeze()
    before = gc.get_threshold()
    gc_settle()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_deployed_application_settles_its_collector_at_import() -> None:
    assert gc.get_threshold()[0] == 5000
    assert gc.get_freeze_count() > 0
