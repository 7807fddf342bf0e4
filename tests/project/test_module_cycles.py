"""No two modules of the product import each other, directly or round a longer loop, counting the
imports inside functions too (grimp, the graph import-linter is built on, sees those). A cycle
hidden in a function-local import still means neither module can be read, tested or moved alone.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)


def import_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively),
    and any module that imports itself; each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph.get(node, ()):
                    found.append(sorted(group))
    return sorted(found)


def _graph(*packages: str) -> dict[str, set[str]]:
    graph = grimp.build_graph(*packages, include_external_packages=False, cache_dir=None)
    return {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}


def test_no_module_of_the_product_is_part_of_an_import_cycle():
    roots = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    assert import_cycles(_graph(*roots)) == []


def test_a_cycle_through_function_local_imports_is_found(tmp_path, monkeypatch):
    package = tmp_path / "looped"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "first.py").write_text("def run():\n    from looped.second import step\n    return step()\n")
    (package / "second.py").write_text("def step():\n    from looped.first import run\n    return run\n")
    (package / "alone.py").write_text("from looped.first import run\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert import_cycles(_graph("looped")) == [["looped.first", "looped.second"]]
    finally:
        for name in [m for m in sys.modules if m == "looped" or m.startswith("looped.")]:
            del sys.modules[name]


def test_a_longer_loop_and_a_self_import_are_cycles_and_a_diamond_is_not():
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a"},
        "d": {"d"},
        "e": {"f", "g"},
        "f": {"h"},
        "g": {"h"},
        "h": set(),
    }
    assert import_cycles(graph) == [["a", "b", "c"], ["d"]]
