"""JSON parsing with a nesting-depth bound, for every place that parses a client's JSON.

CPython's decoder recurses once per level, so a 10,000-deep array raises ``RecursionError``
(a 500 wherever it is not caught), and structures a few hundred levels deep still blow up later,
in validators, audit redaction or ``json.dumps``. Each parser of client input therefore calls
``json_loads_bounded`` and answers ``JsonTooDeep`` (a ``ValueError``, like a syntax error) with
its own parse error.

The depth is measured before decoding, on the raw text with its strings removed, at C speed; a
body with fewer brackets than the bound cannot be too deep, so small bodies skip even that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any

# Deep enough for any real MCP, OAuth or tool payload (the MCP schema itself nests < 10 levels),
# far below the interpreter's recursion limit.
MAX_JSON_DEPTH = 64

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class JsonTooDeep(ValueError):
    """The JSON nests deeper than allowed; parsers answer it as their own parse error."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        super().__init__(f"JSON nests deeper than {max_depth} levels.")


def json_depth(raw: bytes | str) -> int:
    """The deepest nesting of arrays and objects in ``raw`` (0 for a scalar), strings ignored."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets))))


def json_check_depth(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ``JsonTooDeep`` when ``raw`` nests deeper than ``max_depth``."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    # Fewer opening brackets than the bound: it cannot be too deep, and the scan is skipped.
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return
    if json_depth(data) > max_depth:
        raise JsonTooDeep(max_depth)


def json_loads_bounded(
    raw: bytes | str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    parse_constant: Callable[[str], Any] | None = None,
) -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` with ``JsonTooDeep``.

    Other malformed input raises ``json.JSONDecodeError`` or ``UnicodeDecodeError`` as usual
    (both ``ValueError``), so one ``except ValueError`` covers every bad body.
    """
    json_check_depth(raw, max_depth=max_depth)
    try:
        return json.loads(raw, parse_constant=parse_constant)
    except RecursionError as exc:  # a last guard, should the scan ever under-count
        raise JsonTooDeep(max_depth) from exc
