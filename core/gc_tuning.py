"""The garbage collector of a serving process, set once its code is loaded.

CPython's cyclic collector walks every container object it tracks. A served process holds a
quarter of a million of them from its start alone (Django, the SDK, every app's modules, models and
URL patterns), none of which ever becomes garbage, and a full collection walks them all: tens to
hundreds of milliseconds with the event loop stopped, every few seconds under load, which is most
of a busy worker's slowest answers and a good share of its CPU (docs/benchmarks.md).
``gc_settle`` moves what exists at start out of the collector's sight (``gc.freeze``); what
requests make afterwards is still collected. A larger first-generation threshold
(``GC_GEN0_THRESHOLD``) collects the young objects of many requests at once rather than every
few requests, where most of them are already freed by reference counting anyway.

Called at the end of ``config/asgi.py``, after the application and its MCP server are built.
"""

from __future__ import annotations

import gc

from core.conf import gatehouse_settings


def gc_settle() -> None:
    """Freeze what the process holds now and set the young generation's threshold."""
    threshold = gatehouse_settings.GC_GEN0_THRESHOLD
    if threshold <= 0:
        return
    # Garbage made while loading is freed now rather than frozen with the rest.
    gc.collect()
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(threshold, second, third)
