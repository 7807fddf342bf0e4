"""Tool results that a text-only client can use: the structured content, serialized, as text.

The MCP specification says a tool returning structured content SHOULD also return it serialized in
a text block. Many clients hand only the text to their model, so a tool whose text is a one-line
summary hides its data from the model. ``tool_result`` lays out the readable blocks a tool chooses,
then the structured content as JSON in the last block.

The text is bounded (``TEXT_JSON_MAX_BYTES``) because a model's context is; the structured content
is bounded by the tool that makes it, where it can grow (``rows_within``). Past the bound the text
leaves out rows (it stays JSON that parses) and a note before it says how many it holds; a result
too large even without rows is cut and the note says that too.

Tools that return a pydantic model need none of this: the SDK already serializes the model as the
text of their result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from mcp_types import CallToolResult, TextContent

TEXT_JSON_MAX_BYTES = 200_000
ROWS_KEY = "rows"
ROWS_LEFT_OUT = (
    "The JSON below holds the first {shown:,} of {total:,} rows: the whole result is more than "
    "{limit:,} bytes of text. structuredContent holds every row."
)
TEXT_CUT = (
    "The JSON below is cut after {limit:,} of its {size:,} bytes, so it does not parse. "
    "structuredContent holds the whole result."
)


def tool_result(*, structured: dict[str, Any], summary: Sequence[str] = ()) -> CallToolResult:
    """``summary``'s blocks, then ``structured`` as JSON text (bounded), with ``structured`` whole."""
    text, note = structured_text(structured=structured)
    blocks = [*summary, *([note] if note else []), text]
    return CallToolResult(
        content=[TextContent(type="text", text=block) for block in blocks],
        structured_content=structured,
    )


def structured_text(
    *, structured: dict[str, Any], max_bytes: int = TEXT_JSON_MAX_BYTES
) -> tuple[str, str | None]:
    """The JSON text of ``structured`` within ``max_bytes``, and a note when it is not all there."""
    whole = _dumps(structured)
    size = _size(whole)
    if size <= max_bytes:
        return whole, None
    rows = structured.get(ROWS_KEY)
    if isinstance(rows, list) and rows:
        shown = _rows_that_fit(structured=structured, rows=rows, max_bytes=max_bytes)
        if shown is not None:
            text = _dumps({**structured, ROWS_KEY: rows[:shown]})
            return text, ROWS_LEFT_OUT.format(shown=shown, total=len(rows), limit=max_bytes)
    cut = whole.encode(errors="surrogatepass")[:max_bytes].decode(errors="ignore")
    return cut, TEXT_CUT.format(limit=max_bytes, size=size)


def rows_within(*, rows: Sequence[Any], max_bytes: int) -> int:
    """How many of ``rows``, from the first, fit in ``max_bytes`` of JSON with every character
    outside ASCII escaped (the most any encoder of the answer can make of them)."""
    return _rows_fitting(
        rows=rows, used=2, max_bytes=max_bytes, size=lambda row: len(json.dumps(row, separators=(",", ":")))
    )


def _rows_that_fit(*, structured: dict[str, Any], rows: list[Any], max_bytes: int) -> int | None:
    # Compact separators make the size exact: the result without rows, plus each row and a comma.
    used = _size(_dumps({**structured, ROWS_KEY: []}))
    if used > max_bytes:
        return None
    return _rows_fitting(rows=rows, used=used, max_bytes=max_bytes, size=lambda row: _size(_dumps(row)))


def _rows_fitting(*, rows: Sequence[Any], used: int, max_bytes: int, size: Callable[[Any], int]) -> int:
    """How many of ``rows``, from the first, fit when ``used`` bytes are spent already: each row's
    ``size`` plus the comma before every row but the first."""
    for shown, row in enumerate(rows):
        used += size(row) + (1 if shown else 0)
        if used > max_bytes:
            return shown
    return len(rows)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _size(text: str) -> int:
    # An unpaired surrogate is no reason to fail here (core.text_safety is where it is judged).
    return len(text.encode(errors="surrogatepass"))
