"""The demo workflow's queries pass data_agent's SQL gate on both dialects of the sample database."""

from __future__ import annotations

import pytest
import yaml

from data_agent.sample import INSERTS
from data_agent.sql_gate import sql_gate_check
from tests.workflows.test_workflow_import import DEMO

QUERIES = [
    (f"{context['name']}/{command['name']}", command["query"]["sql"])
    for context in yaml.safe_load(DEMO.read_text())["contexts"]
    for command in context["commands"]
    if "query" in command
]


def test_the_demo_has_mostly_query_commands():
    assert len(QUERIES) >= 9


@pytest.mark.parametrize("dialect", ["postgres", "sqlite"])
@pytest.mark.parametrize(("name", "sql"), QUERIES, ids=[name for name, _ in QUERIES])
def test_each_demo_query_passes_the_sql_gate(name, sql, dialect):
    sql_gate_check(sql=sql, dialect=dialect, allowed_tables=frozenset(INSERTS))
