"""Which names an entry from elsewhere (an upstream's tool or prompt) may have in a tenant's lists.

A name is what a model picks a tool by, and a client's list shows little else. The MCP
specification asks tool names of 1 to 128 ASCII letters, digits, ``_``, ``-`` and ``.``; a name
outside that set (a Cyrillic o, U+043E, in ``whoami``; a zero-width space; a bidi control) is
left out. Within the set, a name that looks like one already listed (``wh0ami`` beside
``whoami``, ``Whoami``, ``run-query`` beside ``run_query``) is left out too: the first listed
keeps it.

"Looks like" is equality of a skeleton in the manner of Unicode's UTS #39: case folded, then the
characters that confusables.txt maps to another prototype within this set taken as that one
(``0`` as ``o``; ``1``, ``I`` and so, once folded, ``i`` as ``l``; ``rn`` as ``m``), and the three
separators as one. Those few pairs are the whole of the table for these characters, so it is
written out here rather than loaded.
"""

from __future__ import annotations

import functools
import re
from typing import Literal

from mcp_gateway.kernel.registry import Registry

NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
OUTSIDE_CHARSET = (
    "its name is not 1 to 128 ASCII letters, digits, '_', '-' and '.', as the MCP specification asks"
)
_PROTOTYPES = str.maketrans({"0": "o", "1": "l", "i": "l", "-": "_", ".": "_"})


def name_in_charset(name: str) -> bool:
    return NAME.fullmatch(name) is not None


@functools.lru_cache(maxsize=8192)
def name_skeleton(name: str) -> str:
    """What ``name`` looks like: two names with one skeleton are confusable. Cached: every list
    and every federated call reads the same few names again."""
    return name.casefold().replace("rn", "m").translate(_PROTOTYPES)


def confusable_reason(other: str, *, whose: str) -> str:
    return f"its name looks like {other!r}, {whose}"


SHADOWED = "Gatehouse has its own of that name"
DUPLICATE = "another upstream listed before it has the same name"


class NameLedger:
    """The tool (or prompt) names of one tenant's list, as it is built: Gatehouse's own first, then
    each federated name as it is taken. Says why a name must be left out, if it must."""

    def __init__(self, *, local: frozenset[str], local_skeletons: dict[str, str]) -> None:
        self._local = local
        self._local_skeletons = local_skeletons
        self._taken: dict[str, str] = {}

    def left_out(self, name: str) -> str | None:
        if name in self._local:
            return SHADOWED
        if not name_in_charset(name):
            return OUTSIDE_CHARSET
        skeleton = name_skeleton(name)
        local = self._local_skeletons.get(skeleton)
        if local is not None:
            return confusable_reason(local, whose="one of Gatehouse's own")
        taken = self._taken.get(skeleton)
        if taken == name:
            return DUPLICATE
        if taken is not None:
            return confusable_reason(taken, whose="listed before it")
        return None

    def take(self, name: str) -> None:
        self._taken.setdefault(name_skeleton(name), name)


NamedKind = Literal["tool", "prompt"]


def name_ledger(*, registry: Registry, kind: NamedKind) -> NameLedger:
    """A fresh ledger of ``kind``'s names, holding Gatehouse's own (every toolset's: a federated
    entry never stands in for a local one, whatever the tenant has on)."""
    local, skeletons = _local_names(registry, kind)
    return NameLedger(local=local, local_skeletons=skeletons)


@functools.lru_cache(maxsize=16)
def _local_names(registry: Registry, kind: NamedKind) -> tuple[frozenset[str], dict[str, str]]:
    # A registry's toolsets are fixed once built: their names are read once per kind.
    if kind == "tool":
        local = frozenset(spec.name for spec in registry.tools)
    else:
        local = frozenset(name for toolset in registry.toolsets for name in toolset.prompts)
    return local, {name_skeleton(name): name for name in sorted(local)}
