"""docs/architecture.md stays true to the code: every package and module it names exists, and every
app and subpackage of the product has its section (a new one without a line there fails here)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(settings.BASE_DIR)
DOC = BASE_DIR / "docs" / "architecture.md"
# Folders that are no subsystem of their own: migrations, and management/ (only its commands/).
NOT_SECTIONS = {"migrations", "__pycache__", "templates", "static"}
SECTION = re.compile(r"^### `(?P<path>[a-z_][a-z0-9_/]*)/`$", re.MULTILINE)
MODULE = re.compile(r"^- `(?P<name>[a-z_][a-z0-9_]*)`", re.MULTILINE)


def _sections(text: str) -> dict[str, list[str]]:
    """Each ``### `path/``` section and the module names its bullets give."""
    found: dict[str, list[str]] = {}
    matches = list(SECTION.finditer(text))
    for number, match in enumerate(matches):
        end = matches[number + 1].start() if number + 1 < len(matches) else len(text)
        found[match["path"]] = MODULE.findall(text, match.end(), end)
    return found


def _product_packages() -> set[str]:
    roots = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    packages = set()
    for root in roots:
        for init in (BASE_DIR / root).rglob("__init__.py"):
            folder = init.parent.relative_to(BASE_DIR)
            if NOT_SECTIONS & set(folder.parts) or folder.name == "management":
                continue
            packages.add(folder.as_posix())
    return packages


def test_every_named_module_and_package_exists():
    missing = []
    for package, modules in _sections(DOC.read_text()).items():
        folder = BASE_DIR / package
        if not (folder / "__init__.py").exists():
            missing.append(f"{package}/")
        missing += [
            f"{package}/{name}"
            for name in modules
            if not (folder / f"{name}.py").exists() and not (folder / name / "__init__.py").exists()
        ]
    assert missing == []


def test_every_app_and_subpackage_has_its_section():
    assert sorted(_product_packages() - set(_sections(DOC.read_text()))) == []


def test_a_module_that_is_gone_is_found():
    text = "### `core/`\n\n- `errors`: the hierarchy\n- `no_such_module`: gone\n"
    [(package, modules)] = _sections(text).items()
    assert package == "core"
    assert [m for m in modules if not (BASE_DIR / package / f"{m}.py").exists()] == ["no_such_module"]
