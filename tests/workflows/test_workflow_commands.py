"""import_workflow and export_workflow: one line per problem as FILE:LINE, exit 1, nothing changed."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from tests.workflows.test_workflow_import import DEMO, GOOD, sample_ontology
from workflows.models import Workflow


@pytest.fixture(autouse=True)
def _ontology(tenant):
    sample_ontology(tenant)


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_imports_the_demo_file_with_a_one_line_summary_and_turns_the_toolset_on(tenant):
    out, _ = run("import_workflow", tenant.slug, str(DEMO))
    again, _ = run("import_workflow", tenant.slug, str(DEMO))

    assert out.strip().splitlines() == [
        f"Imported 'Sales analyst' for {tenant.slug}: 3 contexts, 13 commands.",
        f"The workflows toolset is now on for {tenant.slug}.",
    ]
    # Already on: the summary alone.
    assert again.strip().splitlines() == [
        f"Imported 'Sales analyst' for {tenant.slug}: 3 contexts, 13 commands."
    ]


def test_export_prints_yaml_that_imports_back(tenant, tmp_path):
    run("import_workflow", tenant.slug, str(DEMO))
    exported, _ = run("export_workflow", tenant.slug)
    path = tmp_path / "again.yaml"
    path.write_text(exported)

    run("import_workflow", tenant.slug, str(path))

    assert run("export_workflow", tenant.slug)[0] == exported


def test_problems_are_one_line_each_and_nothing_changes(tenant, tmp_path):
    run("import_workflow", tenant.slug, str(DEMO))
    path = tmp_path / "broken.yaml"
    path.write_text(
        GOOD.replace("description: A small workflow.", "descripton: x").replace("name: whoami", "name: nope")
    )

    with pytest.raises(CommandError, match="nothing imported"):
        run("import_workflow", tenant.slug, str(path))
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_workflow", tenant.slug, str(path), stderr=err)

    lines = err.getvalue().strip().splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{path}:2", f"{path}:22"]
    assert Workflow.objects.get(tenant=tenant).name == "Sales analyst"


def test_a_file_that_is_not_utf8_is_refused_with_its_line(tenant, tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(GOOD.replace("Tests.", "Caf\xe9.").encode("latin-1"))

    with pytest.raises(CommandError, match=rf"^{path}:3: the file is not UTF-8"):
        run("import_workflow", tenant.slug, str(path))
    assert not Workflow.objects.exists()


def test_a_ten_megabyte_file_is_refused(tenant, tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_bytes(GOOD.encode() + b"#" * (10 * 1024 * 1024))
    err = io.StringIO()

    with pytest.raises(CommandError):
        call_command("import_workflow", tenant.slug, str(path), stderr=err)

    assert "is longer than" in err.getvalue()
    assert not Workflow.objects.exists()


def test_a_missing_file_is_one_clear_line(tenant, tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        run("import_workflow", tenant.slug, str(tmp_path / "nope.yaml"))


@pytest.mark.parametrize("command", [("import_workflow", "nobody", "x.yaml"), ("export_workflow", "nobody")])
def test_an_unknown_tenant_is_one_clear_line(db, command):
    with pytest.raises(CommandError, match=r"^No tenant 'nobody'\.$"):
        run(*command)


def test_exporting_a_tenant_without_a_workflow_says_so(tenant):
    with pytest.raises(CommandError, match="has no workflow"):
        run("export_workflow", tenant.slug)
