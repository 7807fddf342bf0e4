"""How big and how deep a caller's JSON value (a response schema, an ``extra`` option) may be.

The request body was parsed with a depth bound already (``core.json_bounds``), but that bound is
the whole body's; a schema goes on to a validator and to the provider, and ``extra`` to litellm,
so each gets its own, tighter bound. The walk is iterative: a value too deep for ``json.dumps`` or
a recursive validator is refused here, without recursing into it.
"""

from __future__ import annotations

from typing import Any


def json_shape_problem(value: Any, *, max_depth: int, max_nodes: int, max_string: int) -> str | None:
    """Why ``value`` is too deep, too large or holds too long a string; None when it fits."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"has more than {max_nodes} values"
        if isinstance(item, dict):
            if depth > max_depth:
                return f"nests deeper than {max_depth} levels"
            for key, child in item.items():
                if isinstance(key, str) and len(key) > max_string:
                    return f"has a key longer than {max_string} characters"
                stack.append((child, depth + 1))
        elif isinstance(item, list | tuple):
            if depth > max_depth:
                return f"nests deeper than {max_depth} levels"
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str) and len(item) > max_string:
            return f"has a string longer than {max_string} characters"
    return None
