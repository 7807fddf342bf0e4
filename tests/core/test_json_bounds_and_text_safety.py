"""The shared guards for client JSON (nesting depth) and stored text (NUL, lone surrogates)."""

from __future__ import annotations

import json

import pytest

from core.json_bounds import MAX_JSON_DEPTH, JsonTooDeep, json_depth, json_loads_bounded
from core.text_safety import storable, storable_text, text_unstorable_reason


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
