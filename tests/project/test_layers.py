"""Apps import in one direction only: the import-linter contract in ``pyproject.toml`` holds, covers
every app, and breaks on a single upward import.

Shown failing once by hand, with ``from accounts.models import Tenant`` appended to
``core/errors.py``::

    $ lint-imports
    Contracts: 0 kept, 1 broken.
    Apps import downward only
    core is not allowed to import accounts:
    - core.errors -> accounts.models (l.95)

``test_an_upward_import_breaks_the_contract`` does the same on a copy of the tree, every run.

The contract that only ``language_models`` imports litellm (every model call through its one
door, issue 37) was shown failing by hand, with ``import litellm`` appended to
``data_agent/ask_tool.py``::

    data_agent is not allowed to import litellm:
    -   data_agent.ask_tool -> litellm (l.277)
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _contract() -> dict:
    return tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["tool"]["importlinter"]


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(cwd)},
    )


def test_the_apps_import_downward_only():
    result = _lint(BASE_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(_contract()['contracts'])} kept, 0 broken" in result.stdout


def test_every_app_stands_in_a_layer():
    apps = {path.parent.name for path in BASE_DIR.glob("*/apps.py")} | {"config"}
    contract = _contract()
    layered = {
        name.strip()
        for layer in contract["contracts"][0]["layers"]
        for name in layer.replace(":", "|").split("|")
    }
    assert apps == set(contract["root_packages"]) == layered


def test_an_upward_import_breaks_the_contract(tmp_path):
    for package in _contract()["root_packages"]:
        shutil.copytree(BASE_DIR / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(BASE_DIR / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "core" / "errors.py").open("a") as errors:
        errors.write("\nfrom accounts.models import Tenant  # noqa: E402\n")

    result = _lint(tmp_path)

    assert result.returncode != 0
    assert "core is not allowed to import accounts" in result.stdout
    assert "core.errors -> accounts.models" in result.stdout


def test_every_app_says_what_it_owns_and_may_import_in_two_lines():
    lengths = {}
    for app in _contract()["root_packages"]:
        doc = ast.get_docstring(ast.parse((BASE_DIR / app / "__init__.py").read_text()))
        lengths[app] = len(doc.splitlines()) if doc else 0
    assert {app: n for app, n in lengths.items() if n != 2} == {}


def test_the_kernel_importing_the_transport_breaks_the_endpoints_contract(tmp_path):
    for package in _contract()["root_packages"]:
        shutil.copytree(BASE_DIR / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(BASE_DIR / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "mcp_gateway" / "kernel" / "registry.py").open("a") as registry:
        registry.write("\nfrom mcp_gateway.transport.endpoint import mcp_app_build  # noqa: E402\n")

    result = _lint(tmp_path)

    assert result.returncode != 0
    assert "mcp_gateway.kernel is not allowed to import mcp_gateway.transport" in result.stdout
