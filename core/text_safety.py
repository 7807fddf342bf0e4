"""Text a database can store: the characters PostgreSQL refuses, found or made visible.

PostgreSQL's ``text`` and ``jsonb`` refuse the NUL character, and UTF-8 cannot encode an unpaired
surrogate (which JSON's ``\\udXXX`` escapes can produce). One such character in a value fails the
whole statement it is part of. Two uses:

- Values a person stores on purpose (display names, preferences, client info) are refused with a
  clear message: ``text_unstorable_reason`` says why.
- Values recorded for the record (audit rows) must never be refused: ``storable`` replaces each
  such character with a visible escape (``\\u0000``, ``\\ud800``) and says whether it did.

And text from outside (a model, a literature source, an upstream) that is shown to people or
exported also loses the invisible characters that reorder or hide text: ``text_cleaned``.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def text_is_storable(value: str) -> bool:
    return _UNSTORABLE.search(value) is None


def text_unstorable_reason(value: Any) -> str | None:
    """Why ``value`` (a string, or JSON-like data holding strings) cannot be stored, else None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            match = _UNSTORABLE.search(item)
            if match is not None:
                if match.group() == "\x00":
                    return "contains a NUL character (\\u0000), which cannot be stored"
                return f"contains an unpaired surrogate ({_escape(match)}), which is not valid Unicode"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_path(value: Any, path: str = "") -> str | None:
    """The JSON pointer of the first string (key or value) in ``value`` holding an unpaired
    surrogate, which no UTF-8 text can carry; None when there is none."""
    if isinstance(value, str):
        return path or "/" if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _SURROGATE.search(key):
                return f"{path}/{_SURROGATE.sub('?', key)[:40]}"
            found = surrogate_path(item, f"{path}/{str(key)[:40]}")
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = surrogate_path(item, f"{path}/{index}")
            if found is not None:
                return found
    return None


def storable_text(value: str) -> tuple[str, bool]:
    """``value`` with NUL and unpaired surrogates escaped visibly, and whether any were."""
    if _UNSTORABLE.search(value) is None:
        return value, False
    return _UNSTORABLE.sub(_escape, value), True


def storable(value: Any) -> tuple[Any, bool]:
    """JSON-like ``value`` with every string (keys too) made storable, and whether any changed."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key, key_changed = storable(key) if isinstance(key, str) else (key, False)
            new_item, item_changed = storable(item)
            out[new_key] = new_item
            changed = changed or key_changed or item_changed
        return (out, True) if changed else (value, False)
    if isinstance(value, (list, tuple)):
        items = [storable(item) for item in value]
        if any(changed for _, changed in items):
            return [item for item, _ in items], True
        return value, False
    return value, False


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# Joiners have a use between letters of the scripts and emoji sequences that need them.
_JOINERS = frozenset("\u200c\u200d")
_LINE_SEPARATORS = str.maketrans({"\u2028": "\n", "\u2029": "\n", "\x85": "\n"})


def text_cleaned(value: str) -> str:
    """``value`` as text from outside (a language model, a literature source, an upstream server)
    may be shown to people or exported: without NUL, other control characters (tab and newlines
    kept) and unpaired surrogates, which nobody meant it to contain; and without the invisible
    format characters (Unicode category Cf: bidi overrides, embeddings and isolates such as U+202E,
    zero-width spaces, word joiners, byte-order marks), which can reorder what a reader sees or
    hide a difference, as in a title that reads backwards or a name that only looks like
    another. A zero-width joiner or non-joiner is kept between two non-ASCII characters, where
    scripts and emoji sequences need it."""
    value = _CONTROL.sub("", value)
    if value.isascii():
        return value
    value = value.translate(_LINE_SEPARATORS)
    kept: list[str] = []
    last = len(value) - 1
    for index, char in enumerate(value):
        if unicodedata.category(char) != "Cf" or (
            char in _JOINERS
            and 0 < index < last
            and not value[index - 1].isascii()
            and not value[index + 1].isascii()
        ):
            kept.append(char)
    return "".join(kept)


# Control, format (bidi controls, zero-width spaces), surrogate, private-use and unassigned
# characters, and the line and paragraph separators: nothing a person types in an address or a
# name, and what makes one only look like another.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def text_invisible_character(value: str) -> str | None:
    """The first character of ``value`` a reader cannot see (``U+202E``...), as its code, else None."""
    for char in value:
        if unicodedata.category(char) in _INVISIBLE_CATEGORIES:
            return f"U+{ord(char):04X}"
    return None
