"""Reading the README and the pages under docs/ the way GitHub renders them, for the tests that
keep the documentation true: its links, the commands it names, its client configurations and its
settings table. Plain string work, no Markdown library: the pages use a small, regular subset."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^```[^\n]*\n.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
_FENCED_BLOCK = re.compile(r"^```(?P<lang>[a-z]*)[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Link:
    page: Path
    target: str


def documentation_pages() -> list[Path]:
    """The README, every page under docs/, and the platform folder's and the upstream demo's READMEs
    (they point at docs/)."""
    return [
        README,
        *sorted(DOCS.glob("*.md")),
        ROOT / "platform" / "README.md",
        ROOT / "examples" / "upstream_demo" / "README.md",
    ]


def without_code(text: str) -> str:
    """The prose of a page: code blocks and code spans hold example text, not links."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def fenced_blocks(text: str, *, lang: str) -> list[str]:
    return [match["body"] for match in _FENCED_BLOCK.finditer(text) if match["lang"] == lang]


def links(page: Path) -> list[Link]:
    prose = without_code(page.read_text())
    return [Link(page=page, target=match["target"]) for match in _LINK.finditer(prose)]


def heading_anchor(title: str) -> str:
    """GitHub's anchor for a heading: link markup and backticks dropped, lower case, punctuation
    other than ``-`` and ``_`` removed, spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings make, with GitHub's ``-1``, ``-2`` for repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_FENCE.sub("", page.read_text())):
        anchor = heading_anchor(match["title"])
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found
