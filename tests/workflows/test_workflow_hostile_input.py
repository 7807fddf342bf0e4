"""Hostile workflow files are refused with a line and a reason, never an exception or a write."""

from __future__ import annotations

import pytest

from tests.workflows.test_workflow_import import GOOD, problems_of, sample_ontology
from workflows.importing import DEPTH_MAX, SOURCE_MAX_CHARS
from workflows.models import Workflow
from workflows.rules import TEXT_MAX_CHARS


@pytest.fixture(autouse=True)
def _ontology(tenant):
    sample_ontology(tenant)


def test_a_nul_character_is_refused_on_its_line(tenant):
    problems = problems_of(tenant, GOOD.replace("purpose: Tests.", "purpose: Te\x00sts."))

    assert problems == [(3, "The character U+0000 is not allowed in a YAML file.")]


def test_an_escaped_nul_is_refused_as_unstorable(tenant):
    problems = problems_of(tenant, GOOD.replace("purpose: Tests.", 'purpose: "Te\\0sts"'))

    assert problems[0][0] == 3
    assert "NUL" in problems[0][1]


def test_an_escaped_lone_surrogate_is_refused(tenant):
    problems = problems_of(tenant, GOOD.replace("purpose: Tests.", 'purpose: "\\ud800"'))

    assert problems[0][0] == 3
    assert "surrogate" in problems[0][1]


def test_a_huge_file_is_refused_before_parsing(tenant):
    problems = problems_of(tenant, GOOD + "#" * (10 * 1024 * 1024))

    assert problems == [(1, f"The file is longer than {SOURCE_MAX_CHARS} characters.")]


def test_a_huge_value_is_refused(tenant):
    problems = problems_of(tenant, GOOD.replace("purpose: Tests.", "purpose: " + "x" * (TEXT_MAX_CHARS + 1)))

    assert problems == [(3, f"the workflow purpose is longer than {TEXT_MAX_CHARS} characters.")]


def test_deep_nesting_is_refused(tenant):
    problems = problems_of(tenant, "name: x\npurpose: " + "[" * 10_000 + "]" * 10_000 + "\n")

    assert problems == [(2, f"Nested deeper than {DEPTH_MAX} levels.")]


def test_aliases_are_refused(tenant):
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9)
    )

    problems = problems_of(tenant, laughs)

    assert problems == [(1, "Anchors and aliases are not allowed.")]


@pytest.mark.parametrize(
    "source", ["", "just text", "- a list", "name: x", "contexts: 3", "{name: x, contexts: []}"]
)
def test_files_of_the_wrong_shape_are_refused(tenant, source):
    assert problems_of(tenant, source)
    assert not Workflow.objects.exists()


def test_python_tags_are_refused(tenant):
    problems = problems_of(tenant, GOOD.replace("purpose: Tests.", "purpose: !!python/object:os.system x"))

    assert problems == [(3, "Tags (!...) are not allowed.")]
