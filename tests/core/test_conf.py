"""core.conf: every GATEHOUSE key read through one typed accessor, named after its environment
variable, read at call time, and refusing a value of the wrong type."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import core.conf
from core.conf import GatehouseSettings, gatehouse_settings
from data_agent.ask_tool import ask_question, question_timeout_seconds

BASE_DIR = Path(__file__).resolve().parents[2]
SETTINGS_FILE = BASE_DIR / "config" / "settings.py"
# The one key fed by a family of variables (documented in core.conf): RATE_LIMIT_<SCOPE>.
FAMILIES = {"RATE_LIMITS": "RATE_LIMIT_"}
# settings.GATEHOUSE itself, not gatehouse_settings.GATEHOUSE_TOOLSETS.
DIRECT_READ = re.compile(r"\bsettings\.GATEHOUSE\b")


def _variables_read(node: ast.AST, *, module_reads: dict[str, set[str]]) -> set[str]:
    """The environment variables an expression of config/settings.py reads: the first argument of
    each ``env_*`` call, and those of the module-level names it uses."""
    names: set[str] = set()
    for child in ast.walk(node):
        if (
            isinstance(child, ast.Call)
            and isinstance(child.func, ast.Name)
            and child.func.id.startswith("env_")
            and child.args
            and isinstance(child.args[0], ast.Constant)
            and isinstance(child.args[0].value, str)
        ):
            names.add(child.args[0].value)
        elif isinstance(child, ast.Name):
            names |= module_reads.get(child.id, set())
    return names


def _gatehouse_sources() -> dict[str, set[str]]:
    """Each GATEHOUSE key of config/settings.py, with the environment variables its value reads."""
    module_reads: dict[str, set[str]] = {}
    gatehouse: ast.Dict | None = None
    for statement in ast.parse(SETTINGS_FILE.read_text(encoding="utf-8")).body:
        if isinstance(statement, ast.AnnAssign | ast.Assign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                if not isinstance(target, ast.Name) or statement.value is None:
                    continue
                if target.id == "GATEHOUSE" and isinstance(statement.value, ast.Dict):
                    gatehouse = statement.value
                else:
                    module_reads[target.id] = _variables_read(statement.value, module_reads=module_reads)
    assert gatehouse is not None, "config/settings.py no longer assigns GATEHOUSE a dict literal"
    sources: dict[str, set[str]] = {}
    for key, value in zip(gatehouse.keys, gatehouse.values, strict=True):
        assert isinstance(key, ast.Constant), "GATEHOUSE keys are plain strings"
        assert isinstance(key.value, str), "GATEHOUSE keys are plain strings"
        sources[key.value] = _variables_read(value, module_reads=module_reads)
    return sources


def test_it_reads_every_gatehouse_key_and_no_other():
    assert GatehouseSettings.names() == set(django_settings.GATEHOUSE)
    assert set(_gatehouse_sources()) == set(django_settings.GATEHOUSE)


def test_product_code_reads_gatehouse_only_through_core_conf():
    """A new ``settings.GATEHOUSE[...]`` read would be untyped again; tests may still override."""
    packages = [
        path
        for path in BASE_DIR.iterdir()
        if path.is_dir() and path.name not in {"tests", "benchmarks"} and (path / "__init__.py").exists()
    ]
    readers = [
        str(source.relative_to(BASE_DIR))
        for package in packages
        for source in package.rglob("*.py")
        if DIRECT_READ.search(source.read_text(encoding="utf-8")) and source != BASE_DIR / "core" / "conf.py"
    ]
    assert {package.name for package in packages} >= {"core", "config", "mcp_gateway"}
    assert readers == []


def test_every_key_has_the_type_it_declares_under_the_real_settings():
    for name in GatehouseSettings.names():
        getattr(gatehouse_settings, name)


def test_every_key_is_named_after_the_environment_variable_it_comes_from():
    sources = _gatehouse_sources()
    # Both kinds are there to check: every family is read, and so is a plain key or more.
    assert set(FAMILIES) <= set(sources)
    assert set(sources) - set(FAMILIES)
    for key, variables in sources.items():
        if key in FAMILIES:
            assert variables, key
            assert all(variable.startswith(FAMILIES[key]) for variable in variables), (key, variables)
            # The mapping of a family is spelt out where readers look for it.
            assert all(variable in (core.conf.__doc__ or "") for variable in variables), key
        else:
            assert key in variables, f"GATEHOUSE[{key!r}] is read from {sorted(variables)}"


def test_an_override_is_seen_at_call_time(settings):
    before = gatehouse_settings.MCP_DB_POOL_SIZE
    settings.GATEHOUSE = {**settings.GATEHOUSE, "MCP_DB_POOL_SIZE": before + 3}
    after = gatehouse_settings.MCP_DB_POOL_SIZE
    assert after == before + 3
    settings.GATEHOUSE = {**settings.GATEHOUSE, "RATE_LIMITS": {"tool": "7/hour"}}
    rates = gatehouse_settings.RATE_LIMITS
    assert rates == {"tool": "7/hour"}


def test_the_value_before_an_override_is_read_again_after_it():
    before = gatehouse_settings.MCP_DB_POOL_SIZE
    with override_settings(GATEHOUSE={**django_settings.GATEHOUSE, "MCP_DB_POOL_SIZE": before + 1}):
        assert before + 1 == gatehouse_settings.MCP_DB_POOL_SIZE
    assert before == gatehouse_settings.MCP_DB_POOL_SIZE


def test_the_question_time_limit_and_its_backstop_follow_an_override(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_AGENT_QUESTION_TIMEOUT_SECONDS": 100}
    backstop = ask_question.timeout()
    assert question_timeout_seconds() == 100
    settings.GATEHOUSE = {**settings.GATEHOUSE, "DATA_AGENT_QUESTION_TIMEOUT_SECONDS": 1000}
    assert question_timeout_seconds() == 1000
    # The tool's own limit stays the same margin above the run's, whatever the run's is.
    assert ask_question.timeout() == backstop + 900
    assert ask_question.timeout() > question_timeout_seconds()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("MCP_DB_POOL_SIZE", "4"),
        ("MCP_DB_POOL_SIZE", True),
        ("GATEHOUSE_AUDIT", "false"),
        ("GATEHOUSE_TOOLSETS", "mcp_gateway.toolsets.account"),
        ("METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", None]),
        ("RATE_LIMIT_KEY_PREFIX", None),
        ("RATE_LIMITS", {"tool": 120}),
        ("CIMD_CA_BUNDLE", Path("/etc/ssl/bundle.pem")),
    ],
)
def test_a_value_of_the_wrong_type_fails_loudly(settings, key, value):
    settings.GATEHOUSE = {**settings.GATEHOUSE, key: value}
    with pytest.raises(ImproperlyConfigured, match=key):
        getattr(gatehouse_settings, key)


def test_a_missing_key_fails_loudly(settings):
    settings.GATEHOUSE = {
        key: value for key, value in settings.GATEHOUSE.items() if key != "MCP_SESSION_IDLE_SECONDS"
    }
    with pytest.raises(ImproperlyConfigured, match="MCP_SESSION_IDLE_SECONDS"):
        _ = gatehouse_settings.MCP_SESSION_IDLE_SECONDS


def test_a_secret_of_the_wrong_type_is_named_but_not_shown(settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "METRICS_TOKEN": b"not-shown-anywhere"}
    with pytest.raises(ImproperlyConfigured) as refused:
        _ = gatehouse_settings.METRICS_TOKEN
    assert "METRICS_TOKEN" in str(refused.value)
    assert "not-shown-anywhere" not in str(refused.value)
