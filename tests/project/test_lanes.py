"""`make test` and `make check` hand PYTEST_ARGS to pytest, including arguments that start with a
dash (tests/lanes.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import E2E_FIRST_HALF, pytest_collection_modifyitems
from tests.lanes import lanes_arguments, lanes_plan

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "Makefile"


@pytest.mark.parametrize("check", [False, True])
def test_dashed_pytest_arguments_reach_both_pytest_lanes(check):
    argv = [*(["--check"] if check else []), "--", "-x", "--durations=0", "-k", "not slow"]
    args = lanes_arguments(argv)
    assert (args.check, args.pytest_args) == (check, ["-x", "--durations=0", "-k", "not slow"])
    pytest_lanes = [
        lane for lane in lanes_plan(check_only=args.check, pytest_args=args.pytest_args) if lane.pytest
    ]
    expected = ["in-process"] if check else ["in-process", "e2e-first", "e2e-second"]
    assert [lane.name for lane in pytest_lanes] == expected
    for lane in pytest_lanes:
        [command] = lane.commands
        assert command[-4:] == ["-x", "--durations=0", "-k", "not slow"]


def test_the_makefile_separates_pytest_arguments_from_the_runners_own():
    runs = re.findall(r"-m tests\.lanes (.*)", MAKEFILE.read_text())
    assert runs == ["-- $(PYTEST_ARGS)", "--check -- $(PYTEST_ARGS)"]


def test_each_pytest_lane_has_a_database_and_a_redis_database_of_its_own():
    pytest_lanes = [lane for lane in lanes_plan(check_only=False, pytest_args=[]) if lane.pytest]
    databases = {lane.env["DATABASE_URL"] for lane in pytest_lanes}
    redis = {lane.env["TEST_REDIS_URL"] for lane in pytest_lanes}
    assert len(databases) == len(redis) == len(pytest_lanes) == 3


class _Item:
    """What the marking hook reads of a collected test: its path, and the markers it adds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.markers: list[str] = []

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker.name)


class _Config:
    def __init__(self, half: str | None) -> None:
        self.rootpath = ROOT
        self.half = half
        self.deselected: list[_Item] = []
        self.hook = self

    def getoption(self, name: str) -> str | None:
        assert name == "--e2e-half"
        return self.half

    def pytest_deselected(self, *, items: list[_Item]) -> None:
        self.deselected += items


def _kept(half: str | None) -> tuple[list[Path], list[Path]]:
    files = sorted(ROOT.glob("tests/e2e/**/test_*.py")) + sorted(ROOT.glob("tests/fresh_clone/**/test_*.py"))
    files += [ROOT / "tests" / "oauth" / "test_validators.py"]
    items = [_Item(path) for path in files]
    config = _Config(half)
    pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    return [item.path for item in items], [item.path for item in config.deselected]


def test_the_two_end_to_end_halves_are_every_end_to_end_file_once():
    whole, none_dropped = _kept(None)
    first, dropped_by_first = _kept("first")
    second, dropped_by_second = _kept("second")
    in_process = ROOT / "tests" / "oauth" / "test_validators.py"
    assert none_dropped == []
    assert in_process in first
    assert in_process in second
    first_e2e = [path for path in first if path != in_process]
    second_e2e = [path for path in second if path != in_process]
    assert first_e2e
    assert second_e2e
    assert sorted(first_e2e + second_e2e) == sorted(path for path in whole if path != in_process)
    assert sorted(first_e2e) == sorted(dropped_by_second)
    assert sorted(second_e2e) == sorted(dropped_by_first)
    assert all(path.relative_to(ROOT).as_posix().startswith(E2E_FIRST_HALF) for path in first_e2e)
    # Every folder the first half names holds tests (a renamed folder would silently move).
    for folder in E2E_FIRST_HALF:
        assert any(path.relative_to(ROOT).as_posix().startswith(folder) for path in first_e2e), folder
