"""docs/settings.md lists every environment variable Gatehouse reads, and nothing it does not.

Settings are read in one place (``config/settings.py``, through the ``core.env`` readers), so the
variables are the first argument of each ``env_*`` call there; a few more are read where they are
used (the demo's, prometheus-client's). A setting added without its row, or a row left behind by a
removed setting, fails here."""

from __future__ import annotations

import ast
import re

from tests.support.docs_support import DOCS, ROOT

SETTINGS_PAGE = DOCS / "settings.md"
# Read outside config/settings.py, each by the module that uses it.
READ_ELSEWHERE = {
    "DEMO_PASSWORD": ROOT / "portal" / "management" / "commands" / "bootstrap_demo.py",
    "DEMO_LLM_MODEL": ROOT / "portal" / "management" / "commands" / "bootstrap_demo.py",
    "PROMETHEUS_MULTIPROC_DIR": ROOT / "core" / "metrics.py",
}
_TABLE_ROW = re.compile(r"^\|(?P<first>[^|]*)\|", re.MULTILINE)
_NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def _variables_read_by_settings() -> set[str]:
    tree = ast.parse((ROOT / "config" / "settings.py").read_text())
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("env_")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def _variables_in_the_tables() -> set[str]:
    names = set()
    for row in _TABLE_ROW.finditer(SETTINGS_PAGE.read_text()):
        names |= set(_NAME.findall(row["first"]))
    return names


def test_the_settings_read_the_variables_we_expect_to_find():
    # Guards the comparisons below against passing on an empty parse.
    assert {"PUBLIC_URL", "DATABASE_URL", "RATE_LIMIT_TOOL", "DATA_AGENT_QUERY_TIMEOUT_SECONDS"} <= (
        _variables_read_by_settings()
    )


def test_every_variable_gatehouse_reads_has_a_row():
    read = _variables_read_by_settings() | READ_ELSEWHERE.keys()

    missing = read - _variables_in_the_tables()

    assert not missing, f"variables read but not documented in docs/settings.md: {sorted(missing)}"


def test_every_row_names_a_variable_gatehouse_reads():
    for name, module in READ_ELSEWHERE.items():
        assert f'"{name}"' in module.read_text(), f"{name} is no longer read in {module.relative_to(ROOT)}"
    read = _variables_read_by_settings() | READ_ELSEWHERE.keys()

    # NAME_FILE forms are read by the same env_* call as NAME (core.env).
    stale = {name for name in _variables_in_the_tables() - read if not name.endswith("_FILE")}

    assert not stale, f"docs/settings.md documents variables nothing reads: {sorted(stale)}"
