"""`make run`'s one step before the server (``prepare_run``): it migrates only when a migration is
unapplied, collects static files only when a source changed, keeps the demo people's password in
.local/demo_password (mode 600) and prints it on every start, sets DEMO_PASSWORD on existing people
and says so, and refuses a DEMO_PASSWORD the password validators refuse, in one line, before
anything changes."""

from __future__ import annotations

import io
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from accounts.models import User
from core.errors import InvalidInput
from portal import run_prepare
from portal.demo import DEMO_USERNAMES
from portal.run_prepare import (
    database_migrate_if_needed,
    demo_password_read,
    migrations_unapplied,
    run_banner,
    run_demo_ensure,
    run_summary,
    static_collect_if_changed,
    static_fingerprint_path,
)

WEAK = "password"
REFUSED = "DEMO_PASSWORD is refused:"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(autouse=True)
def _private_local_files(settings, tmp_path, monkeypatch):
    """Nothing written to the checkout's own .local/; a quick hasher, since the people's passwords
    are set and checked many times here."""
    settings.STATIC_ROOT = tmp_path / "staticfiles"
    settings.DEMO_PASSWORD_KEPT_FILE = tmp_path / "demo_password"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    for name in ("DEMO_PASSWORD", "DEMO_PASSWORD_FILE", "DEMO_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def commands_run(monkeypatch) -> list[str]:
    """The management commands portal.run_prepare runs, still run for real."""
    names: list[str] = []
    real = run_prepare.call_command

    def recording(name: str, *args, **kwargs):
        names.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(run_prepare, "call_command", recording)
    return names


def _kept() -> Path:
    return Path(settings.DEMO_PASSWORD_KEPT_FILE)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _has_password(password: str) -> list[str]:
    people = User.objects.filter(username__in=DEMO_USERNAMES).order_by("username")
    return [user.username for user in people if user.check_password(password)]


# Migrations


@pytest.mark.django_db
def test_with_every_migration_applied_it_does_not_migrate(commands_run):
    assert migrations_unapplied() == 0
    assert database_migrate_if_needed() == 0
    assert commands_run == []


@pytest.mark.django_db(transaction=True)
def test_a_migration_not_applied_yet_is_applied_as_after_a_git_pull(commands_run):
    # The admin's last migration changes only choices: nothing in the schema moves.
    call_command("migrate", "admin", "0002_logentry_remove_auto_add", verbosity=0)
    assert migrations_unapplied() == 1

    assert database_migrate_if_needed() == 1

    assert commands_run == ["migrate"]
    assert migrations_unapplied() == 0


# Static files


def test_static_files_are_collected_once_then_not_while_the_sources_are_unchanged(commands_run):
    assert static_collect_if_changed() is True
    assert (Path(settings.STATIC_ROOT) / "admin" / "css" / "base.css").is_file()
    assert static_fingerprint_path().is_file()

    assert static_collect_if_changed() is False
    assert commands_run == ["collectstatic"]


def test_a_changed_static_source_is_collected_again(settings, tmp_path):
    sources = tmp_path / "sources"
    sources.mkdir()
    (sources / "site.css").write_text("body { color: black }")
    settings.STATICFILES_DIRS = [sources]
    static_collect_if_changed()

    (sources / "site.css").write_text("body { color: navy }")
    os.utime(sources / "site.css", ns=(0, (sources / "site.css").stat().st_mtime_ns + 10**9))

    assert static_collect_if_changed() is True
    assert (Path(settings.STATIC_ROOT) / "site.css").read_text() == "body { color: navy }"


def test_a_removed_static_root_is_collected_again():
    static_collect_if_changed()
    shutil.rmtree(settings.STATIC_ROOT)

    assert static_collect_if_changed() is True
    assert (Path(settings.STATIC_ROOT) / "admin" / "css" / "base.css").is_file()


def test_a_fingerprint_stamp_that_is_not_text_means_collect_again():
    static_collect_if_changed()
    static_fingerprint_path().write_bytes(b"\xff\xfe\x00")

    assert static_collect_if_changed() is True


# The demo people's password


@pytest.mark.django_db
def test_a_fresh_install_generates_a_password_and_keeps_it_private():
    sign_in = run_demo_ensure(given=None, path=_kept(), language_model=None)

    assert sign_in.origin == "generated"
    assert sign_in.password is not None
    assert _kept().read_text() == f"{sign_in.password}\n"
    assert _mode(_kept()) == 0o600
    assert _has_password(sign_in.password) == ["alice", "bob", "carol"]


@pytest.mark.django_db
def test_every_start_prints_the_kept_password_not_only_the_first():
    first = run_demo_ensure(given=None, path=_kept(), language_model=None)

    again = run_demo_ensure(given=None, path=_kept(), language_model=None)

    assert again.origin == "kept"
    assert again.password == first.password
    assert again.demo.people.created == ()
    banner = run_banner(public_url="http://127.0.0.1:8000", sign_in=again, password_file=_kept(), manage="m")
    assert f"  Password:      {first.password}" in banner


@pytest.mark.django_db
def test_demo_password_on_an_existing_install_changes_the_people_password_and_says_so():
    run_demo_ensure(given=None, path=_kept(), language_model=None)

    sign_in = run_demo_ensure(given="a-new-demo-password", path=_kept(), language_model=None)

    assert sign_in.demo.people.changed == ("alice", "bob", "carol")
    assert _has_password("a-new-demo-password") == ["alice", "bob", "carol"]
    assert _kept().read_text() == "a-new-demo-password\n"
    assert _mode(_kept()) == 0o600
    summary = run_summary(migrated=0, collected=False, sign_in=sign_in)
    assert "DEMO_PASSWORD: changed the password of alice, bob and carol." in summary


@pytest.mark.django_db
def test_the_same_demo_password_again_changes_nobody():
    run_demo_ensure(given="a-new-demo-password", path=_kept(), language_model=None)
    before = list(User.objects.filter(username__in=DEMO_USERNAMES).values_list("pk", "password"))

    sign_in = run_demo_ensure(given="a-new-demo-password", path=_kept(), language_model=None)

    assert sign_in.demo.people.changed == ()
    assert list(User.objects.filter(username__in=DEMO_USERNAMES).values_list("pk", "password")) == before
    assert not any(
        line.startswith("DEMO_PASSWORD:")
        for line in run_summary(migrated=0, collected=False, sign_in=sign_in)
    )


@pytest.mark.django_db
def test_demo_password_resets_only_the_person_whose_password_was_changed():
    run_demo_ensure(given="a-new-demo-password", path=_kept(), language_model=None)
    bob = User.objects.get(username="bob")
    bob.set_password("bobs-own-choice-1")
    bob.save()

    sign_in = run_demo_ensure(given="a-new-demo-password", path=_kept(), language_model=None)

    assert sign_in.demo.people.changed == ("bob",)
    assert _has_password("a-new-demo-password") == ["alice", "bob", "carol"]


@pytest.mark.django_db
def test_people_who_predate_the_kept_file_get_how_to_set_a_password_instead_of_nothing():
    call_command("bootstrap_demo", stdout=io.StringIO())
    before = list(User.objects.filter(username__in=DEMO_USERNAMES).values_list("password", flat=True))

    sign_in = run_demo_ensure(given=None, path=_kept(), language_model=None)

    assert sign_in.origin == "unknown"
    assert sign_in.password is None
    assert not _kept().exists()
    assert list(User.objects.filter(username__in=DEMO_USERNAMES).values_list("password", flat=True)) == before
    banner = run_banner(
        public_url="http://127.0.0.1:8000", sign_in=sign_in, password_file=_kept(), manage="m"
    )
    assert not any(line.startswith("  Password:") for line in banner)
    assert any("DEMO_PASSWORD=... make run" in line for line in banner)


@pytest.mark.django_db
def test_a_person_missing_from_an_install_gets_the_kept_password():
    first = run_demo_ensure(given=None, path=_kept(), language_model=None)
    User.objects.filter(username="carol").delete()

    again = run_demo_ensure(given=None, path=_kept(), language_model=None)

    assert again.demo.people.created == ("carol",)
    assert first.password is not None
    assert _has_password(first.password) == ["alice", "bob", "carol"]


@pytest.mark.django_db
def test_a_demo_language_model_is_made_acme_default_and_named_in_the_summary():
    from language_models.models import LanguageModel

    sign_in = run_demo_ensure(given=None, path=_kept(), language_model="openai/gpt-4o-mini")

    summary = run_summary(migrated=0, collected=False, sign_in=sign_in, language_model="openai/gpt-4o-mini")
    assert LanguageModel.objects.get(tenant__slug="acme", is_default=True).model == "openai/gpt-4o-mini"
    assert any("openai/gpt-4o-mini" in line for line in summary)


def test_a_kept_file_others_can_read_is_made_private():
    _kept().write_text("kept-demo-password\n")
    _kept().chmod(0o644)

    assert demo_password_read(path=_kept()) == "kept-demo-password"
    assert _mode(_kept()) == 0o600


def test_a_kept_file_that_is_not_text_is_one_line_that_says_what_to_do():
    _kept().write_bytes(b"\xff\xfe not utf-8")

    with pytest.raises(InvalidInput) as refused:
        demo_password_read(path=_kept())

    assert "\n" not in str(refused.value)
    assert "DEMO_PASSWORD=... make run" in str(refused.value)


# The whole command


def _prepare_run(**options) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    call_command("prepare_run", port=_free_port(), stdout=stdout, stderr=stderr, **options)
    return stdout.getvalue(), stderr.getvalue()


def _refused() -> str:
    stderr = io.StringIO()
    with pytest.raises(SystemExit) as stopped:
        call_command("prepare_run", port=_free_port(), stdout=io.StringIO(), stderr=stderr)
    assert stopped.value.code == 1
    lines = stderr.getvalue().strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.django_db(transaction=True)
def test_it_prints_how_to_sign_in_on_every_start_and_skips_what_is_done():
    first, _ = _prepare_run()
    again, _ = _prepare_run()

    password = _kept().read_text().strip()
    assert "static files collected" in first
    assert "Prepared: database up to date, static files unchanged, demo people in place." in again
    for output in (first, again):
        lines = output.splitlines()
        assert f"  MCP endpoint:  {settings.PUBLIC_URL}/mcp" in lines
        assert f"  Password:      {password}" in lines
        assert any(
            line.startswith("  Reset one:") and "manage.py changepassword alice" in line for line in lines
        )
        assert any(line.startswith("  Admin:") and "manage.py createsuperuser" in line for line in lines)


@pytest.mark.django_db
def test_a_weak_demo_password_is_refused_in_one_line_before_anything_changes(monkeypatch, commands_run):
    monkeypatch.setenv("DEMO_PASSWORD", WEAK)

    line = _refused()

    assert line.startswith(REFUSED)
    assert "too common" in line
    assert commands_run == []
    assert not User.objects.filter(username__in=DEMO_USERNAMES).exists()
    assert not _kept().exists()


@pytest.mark.django_db
def test_a_demo_password_like_the_username_is_refused(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "carol-example")

    assert "too similar" in _refused()


@pytest.mark.django_db
def test_a_demo_password_with_an_invalid_utf8_byte_is_refused_in_one_line(monkeypatch):
    # How Python reads an environment variable holding the byte 0xff.
    monkeypatch.setenv("DEMO_PASSWORD", os.fsdecode(b"long-enough-\xff-password"))

    line = _refused()

    assert line.startswith(REFUSED)
    assert "not valid UTF-8" in line


@pytest.mark.django_db
def test_a_demo_password_file_with_a_nul_is_refused_in_one_line(monkeypatch, tmp_path):
    given = tmp_path / "given"
    given.write_text("long-enough\x00password")
    monkeypatch.setenv("DEMO_PASSWORD_FILE", str(given))

    assert "NUL" in _refused()


@pytest.mark.django_db
def test_a_huge_demo_password_is_set_like_any_other():
    huge = "a-Huge-demo-password-" * 5000

    sign_in = run_demo_ensure(given=huge, path=_kept(), language_model=None)

    assert sign_in.password == huge
    assert _has_password(huge) == ["alice", "bob", "carol"]


def test_make_run_stops_on_a_weak_demo_password_and_starts_no_server():
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if key not in {"PORT"}}
    env["DEMO_PASSWORD"] = WEAK
    # -o: the virtualenv counts as installed, so the test never reinstalls it.
    result = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "run", f"PORT={port}"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode != 0
    ours = [line for line in result.stderr.strip().splitlines() if not line.startswith("make")]
    assert len(ours) == 1, result.stderr
    assert ours[0].startswith(REFUSED)
    assert "Gatehouse is starting" not in result.stdout


@pytest.mark.django_db(transaction=True)
def test_a_demo_model_litellm_cannot_route_stops_it_before_anything_changes(monkeypatch):
    monkeypatch.setenv("DEMO_LLM_MODEL", "opneai/gpt-4o")
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)

    line = _refused()

    assert line.startswith("DEMO_LLM_MODEL: The language model 'opneai/gpt-4o'")
    assert not _kept().exists()
