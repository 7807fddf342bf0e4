from __future__ import annotations

import pytest
from django.core.management import call_command

from accounts.models import Membership, Tenant, User
from research.models import LibraryPaper

pytestmark = pytest.mark.django_db

DEMO_USERNAMES = ["alice", "bob", "carol"]


def _state() -> list[tuple[str, str, str]]:
    return sorted(
        Membership.objects.filter(user__username__in=DEMO_USERNAMES).values_list(
            "user__username", "tenant__slug", "role"
        )
    )


def test_it_creates_the_demo_tenants_and_people(monkeypatch, capsys):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("bootstrap_demo")
    assert set(Tenant.objects.values_list("slug", flat=True)) == {"acme", "globex"}
    assert _state() == [("alice", "acme", "admin"), ("bob", "acme", "viewer"), ("carol", "globex", "admin")]
    assert User.objects.get(username="bob").check_password("a-demo-password")


def _people() -> list[tuple[int, str]]:
    return list(
        User.objects.filter(username__in=DEMO_USERNAMES).order_by("username").values_list("pk", "password")
    )


def test_running_it_twice_changes_nothing(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("bootstrap_demo")
    before = (_state(), _people())
    call_command("bootstrap_demo")
    assert (_state(), _people()) == before


def test_another_demo_password_is_set_on_the_existing_people_and_said_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("bootstrap_demo")
    pks = [pk for pk, _ in _people()]
    capsys.readouterr()

    monkeypatch.setenv("DEMO_PASSWORD", "another-password")
    call_command("bootstrap_demo")

    assert (
        "DEMO_PASSWORD: changed the password of alice, bob and carol." in capsys.readouterr().out.splitlines()
    )
    assert [pk for pk, _ in _people()] == pks
    assert all(
        user.check_password("another-password") for user in User.objects.filter(username__in=DEMO_USERNAMES)
    )


def test_a_demo_password_the_validators_refuse_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("DEMO_PASSWORD", "12345678")

    with pytest.raises(SystemExit) as stopped:
        call_command("bootstrap_demo")

    assert stopped.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("DEMO_PASSWORD is refused:")
    assert "entirely numeric" in lines[0]
    assert not User.objects.filter(username__in=DEMO_USERNAMES).exists()


def test_without_a_password_it_generates_and_prints_one(monkeypatch, capsys):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    call_command("bootstrap_demo")
    output = capsys.readouterr().out
    assert "Generated password" in output
    password = output.rsplit(": ", 1)[1].strip()
    assert User.objects.get(username="alice").check_password(password)


def test_the_sample_is_read_through_a_role_that_cannot_write(monkeypatch):
    import psycopg
    from django.db import connection

    from data_agent.models import DataSource
    from data_agent.sample import DATA_SOURCE_NAME
    from data_agent.selectors import data_source_url

    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("bootstrap_demo")
    url = data_source_url(data_source=DataSource.objects.get(tenant__slug="acme", name=DATA_SOURCE_NAME))
    assert f"{connection.settings_dict['NAME']}_sample_acme_reader" in url
    with psycopg.connect(url, autocommit=True) as reader:
        assert reader.execute("SELECT count(*) FROM regions").fetchone() == (6,)
        for statement in (
            "DELETE FROM regions",
            "CREATE TABLE stolen (id int)",
            "UPDATE orders SET status = 'x'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(statement)


@pytest.mark.django_db(transaction=True)
def test_the_demo_gives_acme_the_sales_analyst_workflow_with_its_toolset_on(monkeypatch):
    from io import StringIO

    from django.core.management import call_command

    from mcp_gateway.models import TenantToolset
    from workflows.models import Workflow, WorkflowCommand

    monkeypatch.setenv("DEMO_PASSWORD", "demo-password-for-tests")
    out = StringIO()
    call_command("bootstrap_demo", stdout=out)
    again = StringIO()
    call_command("bootstrap_demo", stdout=again)

    workflow = Workflow.objects.get(tenant__slug="acme")
    assert workflow.name == "Sales analyst"
    assert WorkflowCommand.objects.filter(context__workflow=workflow).count() == 13
    assert TenantToolset.objects.get(tenant__slug="acme", toolset="workflows").enabled
    assert "Workflow for acme: 'Sales analyst'" in out.getvalue()
    # A second run keeps the workflow it made (and whatever an operator changed in it).
    assert Workflow.objects.get(tenant__slug="acme").pk == workflow.pk
    assert not Workflow.objects.filter(tenant__slug="globex").exists()


@pytest.mark.django_db(transaction=True)
def test_the_demo_gives_globex_the_demo_upstream_once_with_the_tools_it_lists(monkeypatch):
    import sys
    from io import StringIO

    from upstreams.demo import DEMO_SERVER
    from upstreams.models import Transport, Upstream

    monkeypatch.setenv("DEMO_PASSWORD", "demo-password-for-tests")
    # Not capsys: the stdio transport hands the server its standard error, which must be a file.
    out = StringIO()
    call_command("bootstrap_demo", stdout=out)
    first = Upstream.objects.get(tenant__slug="globex")
    call_command("bootstrap_demo", stdout=StringIO())

    row = Upstream.objects.get(tenant__slug="globex")
    assert row.pk == first.pk
    assert (row.name, row.transport, row.prefix_tools, row.enabled) == ("demo", Transport.STDIO, True, True)
    assert (row.command, row.args) == (sys.executable, [str(DEMO_SERVER.resolve())])
    # Listed from the running server, prefixed with the upstream's name.
    assert row.tool_names == ["demo_convert_units", "demo_roll_dice", "demo_word_count"]
    assert not Upstream.objects.filter(tenant__slug="acme").exists()
    assert (
        "Upstream for globex: 'demo', the stdio server examples/upstream_demo/server.py "
        "(demo_convert_units, demo_roll_dice, demo_word_count; docs/upstreams.md)."
    ) in out.getvalue().splitlines()


@pytest.mark.django_db(transaction=True)
def test_a_moved_checkout_points_the_demo_upstream_at_the_new_path_and_keeps_the_operator_s_choices(
    monkeypatch,
):
    from upstreams.demo import DEMO_SERVER
    from upstreams.models import Upstream

    monkeypatch.setenv("DEMO_PASSWORD", "demo-password-for-tests")
    call_command("bootstrap_demo")
    Upstream.objects.filter(tenant__slug="globex").update(
        command="/old/checkout/.venv/bin/python",
        args=["/old/checkout/examples/upstream_demo/server.py"],
        tool_names=[],
        enabled=False,
        exclude_tools=["roll_dice"],
    )
    call_command("bootstrap_demo")

    row = Upstream.objects.get(tenant__slug="globex")
    assert row.args == [str(DEMO_SERVER.resolve())]
    assert (row.enabled, row.exclude_tools) == (False, ["roll_dice"])
    assert row.tool_names == ["demo_convert_units", "demo_word_count"]


@pytest.mark.django_db(transaction=True)
def test_a_demo_server_that_cannot_start_is_said_in_one_line_and_the_rest_of_the_demo_is_made(
    monkeypatch, tmp_path
):
    from io import StringIO

    from upstreams import demo
    from upstreams.models import Upstream

    monkeypatch.setenv("DEMO_PASSWORD", "demo-password-for-tests")
    monkeypatch.setattr(demo, "DEMO_SERVER", tmp_path / "missing" / "server.py")
    out = StringIO()
    call_command("bootstrap_demo", stdout=out)

    row = Upstream.objects.get(tenant__slug="globex")
    assert row.args == [str(tmp_path / "missing" / "server.py")]
    assert row.tool_names == []
    assert row.last_tested is None
    lines = out.getvalue().splitlines()
    assert demo.DEMO_NOT_STARTED in lines
    assert User.objects.filter(username__in=DEMO_USERNAMES).count() == 3


def _libraries() -> list[tuple[str, int]]:
    return sorted(
        (slug, LibraryPaper.objects.filter(tenant__slug=slug).count()) for slug in ("acme", "globex")
    )


def test_the_demo_fills_both_tenants_libraries_with_a_real_bibliography_once(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "a-demo-password")
    call_command("bootstrap_demo")
    first = _libraries()
    updated = dict(LibraryPaper.objects.values_list("pk", "updated"))
    call_command("bootstrap_demo")

    assert first == [("acme", 24), ("globex", 24)]
    assert _libraries() == first
    assert dict(LibraryPaper.objects.values_list("pk", "updated")) == updated
    attention = LibraryPaper.objects.get(tenant__slug="acme", doi="10.48550/arxiv.1706.03762")
    assert attention.title == "Attention Is All You Need"
    assert "Łukasz Kaiser" in attention.authors
    assert LibraryPaper.objects.get(tenant__slug="globex", doi="10.1162/neco.1997.9.8.1735").authors == [
        "Sepp Hochreiter",
        "Jürgen Schmidhuber",
    ]
