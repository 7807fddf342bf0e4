"""Names from elsewhere: the specification's character set, and confusable skeletons."""

from __future__ import annotations

import pytest

from mcp_gateway.kernel.federated_names import name_in_charset, name_skeleton


@pytest.mark.parametrize(
    "name",
    ["whoami", "bench_echo", "a.b-c_d", "X" * 128, "run_query2"],
)
def test_names_in_the_specifications_set(name):
    assert name_in_charset(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "X" * 129,
        "wh\u043eami",  # Cyrillic o
        "who\u200bami",  # zero-width space
        "whoami\u202e",  # bidi override
        "who ami",
        "who/ami",
        "whoami\n",
        "who\x00ami",
        "caf\u00e9",
    ],
)
def test_names_outside_it(name):
    assert not name_in_charset(name)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("whoami", "wh0ami"),
        ("whoami", "Whoami"),
        ("whoami", "WHOAMI"),
        ("login", "Iogin"),
        ("login", "1ogin"),
        ("run_query", "run-query"),
        ("run_query", "run.query"),
        ("modern", "modem"),
    ],
)
def test_confusable_names_share_a_skeleton(first, second):
    assert name_skeleton(first) == name_skeleton(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [("whoami", "whoami2"), ("get_user", "get_users"), ("echo", "echo_all"), ("a", "b")],
)
def test_distinct_names_do_not(first, second):
    assert name_skeleton(first) != name_skeleton(second)
