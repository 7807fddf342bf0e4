"""The sources a plan may name, and which ones each domain starts with.

Each lives in a module of this package exposing ``source``; the setting ``RESEARCH_SOURCES`` lists
the ones this deployment offers (an operator on a closed network keeps only ``library``).
"""

from __future__ import annotations

from importlib import import_module

from core.conf import gatehouse_settings
from research.sources.base import Source

SOURCE_NAMES = ("openalex", "crossref", "arxiv", "library")
# Which sources a new plan starts with, per domain; the person may edit the plan.
DOMAIN_SOURCES: dict[str, tuple[str, ...]] = {
    "general": ("openalex", "crossref", "arxiv", "library"),
    "computer_science": ("arxiv", "openalex", "library"),
    "physics": ("arxiv", "openalex", "library"),
    "mathematics": ("arxiv", "openalex", "library"),
    "biomedical": ("openalex", "crossref", "library"),
    "social_sciences": ("openalex", "crossref", "library"),
    "humanities": ("openalex", "crossref", "library"),
}
DOMAINS = tuple(DOMAIN_SOURCES)


def sources_offered() -> tuple[str, ...]:
    """The sources this deployment offers, in the order above."""
    offered = set(gatehouse_settings.RESEARCH_SOURCES)
    return tuple(name for name in SOURCE_NAMES if name in offered)


def sources_for_domain(domain: str) -> tuple[str, ...]:
    offered = set(sources_offered())
    return tuple(name for name in DOMAIN_SOURCES[domain] if name in offered)


def source_get(name: str) -> Source:
    if name not in SOURCE_NAMES:
        raise KeyError(name)
    module = import_module(f"research.sources.{name}")
    source: Source = module.source
    return source
