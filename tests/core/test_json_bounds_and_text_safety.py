"""The shared guards for client JSON (nesting depth), stored text (NUL, lone surrogates) and text
from outside shown to people (what reorders or hides it)."""

from __future__ import annotations

import json

import pytest

from core.json_bounds import MAX_JSON_DEPTH, JsonTooDeep, json_depth, json_loads_bounded
from core.text_safety import storable, storable_text, text_cleaned, text_unstorable_reason


@pytest.mark.parametrize(
    ("raw", "depth"),
    [
        ("1", 0),
        ('"[[[["', 0),
        ('{"a": [1, {"b": "]]]"}]}', 3),
        (r'["\"[", [[]]]', 3),
        (b"[[]]", 2),
    ],
)
def test_depth_ignores_brackets_inside_strings(raw, depth):
    assert json_depth(raw) == depth


def test_deep_json_is_refused_as_a_value_error_not_a_recursion_error():
    for depth in (MAX_JSON_DEPTH + 1, 10_000, 200_000):
        with pytest.raises(JsonTooDeep) as info:
            json_loads_bounded("[" * depth + "]" * depth)
        assert isinstance(info.value, ValueError)


def test_json_at_the_bound_parses():
    raw = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json_loads_bounded(raw) == json.loads(raw)


def test_malformed_json_still_raises_a_value_error():
    with pytest.raises(UnicodeDecodeError):
        json_loads_bounded(b"\xff\xfe{")
    with pytest.raises(json.JSONDecodeError):
        json_loads_bounded("{")


def test_unstorable_text_is_named_with_a_reason():
    assert text_unstorable_reason("fine") is None
    assert "NUL" in str(text_unstorable_reason({"k": ["a\x00b"]}))
    assert "surrogate" in str(text_unstorable_reason(["\ud800"]))
    assert "NUL" in str(text_unstorable_reason({"k\x00": 1}))


def test_storable_escapes_visibly_and_says_so():
    assert storable_text("plain") == ("plain", False)
    assert storable_text("a\x00b\udfff") == ("a\\u0000b\\udfff", True)
    value, changed = storable({"k\x00": ["x", "\ud800", 3, None]})
    assert changed
    assert value == {"k\\u0000": ["x", "\\ud800", 3, None]}
    clean = {"a": [1, "b"]}
    assert storable(clean) == (clean, False)
    json.dumps(value).encode("utf-8")  # now encodable


@pytest.mark.parametrize(
    ("shown", "cleaned"),
    [
        ("Title \u202ereversed", "Title reversed"),  # right-to-left override
        ("a\u202ab\u202cc\u2066d\u2069", "abcd"),  # embedding, pop, isolates
        ("who\u200bami", "whoami"),  # zero-width space
        ("who\u200dami", "whoami"),  # a joiner between ASCII letters
        ("\ufeffBOM first", "BOM first"),
        ("soft\u00adhyphen", "softhyphen"),
        ("line\u2028break", "line\nbreak"),
        ("Ti\x1btle\x00", "Title"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("\U0001f469\u200d\U0001f4bb", "\U0001f469\u200d\U0001f4bb"),  # an emoji sequence keeps its joiner
        (
            "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
            "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
        ),
        (
            "\u05e9\u05dc\u05d5\u05dd plain",
            "\u05e9\u05dc\u05d5\u05dd plain",
        ),  # right-to-left text itself stays
        ("caf\u00e9 na\u00efve", "caf\u00e9 na\u00efve"),
    ],
)
def test_text_from_outside_loses_what_reorders_or_hides_it(shown, cleaned):
    assert text_cleaned(shown) == cleaned
