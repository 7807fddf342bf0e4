"""What ``make run`` does before the server starts, each step skipped when it is already done.

A restart is the common case, and each of these as a Django process of its own would pay for
importing Django and the app again: ``prepare_run`` does them all in one, and each asks first
whether there is anything to do. Migrating only when the plan is non-empty is what ``migrate
--check`` asks; collecting static files only when a fingerprint of the sources (path, size and
modification time of every file the finders list) differs from the one stored beside STATIC_ROOT.
A ``git pull`` that brings a migration or a changed stylesheet is picked up on the next start.

The demo people's password is kept in ``.local/demo_password`` (git-ignored, mode 600) so that every
start can print it, not only the first.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.errors import InvalidInput
from data_agent.models import OntologyStatus
from portal.demo import (
    DEMO_PEOPLE,
    DEMO_USERNAMES,
    Demo,
    demo_ensure,
    demo_model_line,
    demo_password_changed_line,
    names_joined,
)
from upstreams.demo import upstream_demo_line

PASSWORD_FILE_MODE = 0o600


# Migrations


def migrations_unapplied() -> int:
    """How many migrations ``migrate`` would apply: the length of its plan to every app's leaf."""
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def database_migrate_if_needed() -> int:
    """Apply the unapplied migrations, if any; how many there were."""
    unapplied = migrations_unapplied()
    if unapplied:
        call_command("migrate", interactive=False, verbosity=0)
    return unapplied


# Static files


def static_fingerprint() -> str:
    """A digest of every file collectstatic would copy: its finder's path, its size and its mtime.

    Listing and stat-ing them is milliseconds; collectstatic's own comparison takes a Django process.
    """
    ignore_patterns = list(apps.get_app_config("staticfiles").ignore_patterns)  # type: ignore[attr-defined]
    entries = []
    for finder in get_finders():
        for path, storage in finder.list(ignore_patterns):
            full = storage.path(path)
            info = os.stat(full)
            prefix = getattr(storage, "prefix", None) or ""
            entries.append(f"{prefix}/{path}\0{full}\0{info.st_size}\0{info.st_mtime_ns}")
    digest = hashlib.sha256(str(settings.STATIC_ROOT).encode())
    for entry in sorted(entries):
        digest.update(entry.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def static_fingerprint_path() -> Path:
    # Beside STATIC_ROOT, not in it: WhiteNoise serves everything in STATIC_ROOT.
    root = Path(settings.STATIC_ROOT)
    return root.with_name(f"{root.name}.fingerprint")


def static_collect_if_changed() -> bool:
    """Run collectstatic when the sources changed since the last collection, or nothing was
    collected yet; whether it ran."""
    stamp = static_fingerprint_path()
    fingerprint = static_fingerprint()
    try:
        collected = stamp.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        collected = ""
    if collected == fingerprint and Path(settings.STATIC_ROOT).is_dir():
        return False
    call_command("collectstatic", interactive=False, verbosity=0)
    stamp.write_text(fingerprint + "\n", encoding="utf-8")
    return True


# The demo people's password


def demo_password_read(*, path: Path) -> str | None:
    """The password kept in ``path``; None when there is none. A file others could read is made
    private (an older copy, or one written by hand)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"The demo password file {path} cannot be read ({exc}); delete it and set one with "
            "DEMO_PASSWORD=... make run."
        ) from None
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(PASSWORD_FILE_MODE)
    return text.rstrip("\r\n") or None


def demo_password_write(*, path: Path, password: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PASSWORD_FILE_MODE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        # os.open's mode applies to a new file only; an existing one keeps its own until told.
        os.fchmod(handle.fileno(), PASSWORD_FILE_MODE)
        handle.write(password + "\n")


@dataclass(frozen=True)
class RunSignIn:
    demo: Demo
    # The people's password, None when make run does not know it (they predate the kept file).
    password: str | None
    # Where it came from: "DEMO_PASSWORD", "kept" (the file), "generated" (now) or "unknown".
    origin: str


def run_demo_ensure(*, given: str | None, path: Path, language_model: str | None) -> RunSignIn:
    """The demo, and the password to print for its people.

    ``given`` (DEMO_PASSWORD) is set on every demo person and kept. Else the kept one is what people
    created now get, without checking the others' (they have it, unless changed with
    ``changepassword``: a check would cost a slow hash per person on every start). Else a generated
    one, kept when it is everybody's: when the people existed before the file, their password is
    unknown here, and the banner says how to set one.
    """
    kept = demo_password_read(path=path)
    if given is not None:
        demo = demo_ensure(password=given, reset_existing=True, language_model=language_model)
        if kept != given:
            demo_password_write(path=path, password=given)
        return RunSignIn(demo=demo, password=given, origin="DEMO_PASSWORD")
    if kept is not None:
        demo = demo_ensure(password=kept, reset_existing=False, language_model=language_model)
        return RunSignIn(demo=demo, password=kept, origin="kept")
    demo = demo_ensure(password=None, reset_existing=False, language_model=language_model)
    if set(demo.people.created) == set(DEMO_USERNAMES):
        demo_password_write(path=path, password=demo.people.password)
        return RunSignIn(demo=demo, password=demo.people.password, origin="generated")
    return RunSignIn(demo=demo, password=None, origin="unknown")


# What make run prints


def run_summary(
    *, migrated: int, collected: bool, sign_in: RunSignIn, language_model: str | None = None
) -> list[str]:
    """One line of what was done, then one for anything the operator should know."""
    people = sign_in.demo.people
    done = [
        f"{migrated} migrations applied" if migrated else "database up to date",
        "static files collected" if collected else "static files unchanged",
        f"created {names_joined(people.created)}" if people.created else "demo people in place",
    ]
    lines = [f"Prepared: {', '.join(done)}."]
    if people.changed:
        lines.append(demo_password_changed_line(changed=people.changed))
    if language_model:
        lines.append(demo_model_line(model=language_model))
    if sign_in.origin == "unknown" and people.created:
        lines.append(f"Created {names_joined(people.created)} with the password {people.password}")
    ontology = sign_in.demo.ontology
    if ontology.status != OntologyStatus.READY:
        detail = f": {ontology.status_detail}" if ontology.status_detail else ""
        lines.append(f"Sample data for acme: ontology {ontology.name!r} is {ontology.status}{detail}")
    if not sign_in.demo.upstream.tool_names:
        lines.append(upstream_demo_line(upstream=sign_in.demo.upstream))
    return lines


def run_banner(*, public_url: str, sign_in: RunSignIn, password_file: Path, manage: str) -> list[str]:
    """How to reach and sign in to the server that starts next. Tests read the ``MCP endpoint:``
    and ``Password:`` lines."""
    lines = [
        "",
        "Gatehouse is starting.",
        f"  MCP endpoint:  {public_url}/mcp",
        f"  Sign in as:    {DEMO_PEOPLE}",
    ]
    file = _shown_path(password_file)
    if sign_in.password is not None:
        where = (
            f"from DEMO_PASSWORD, kept in {file}"
            if sign_in.origin == "DEMO_PASSWORD"
            else f"kept in {file}; DEMO_PASSWORD=... make run sets another"
        )
        lines += [f"  Password:      {sign_in.password}", f"                 ({where})"]
    else:
        lines += [
            f"  Their password is not kept in {file} (it was set before make run kept it);",
            "                 set one for all three with DEMO_PASSWORD=... make run",
        ]
    lines += [
        f"  Reset one:     {manage} changepassword alice",
        f"  Admin:         {public_url}/admin/ (create an operator: {manage} createsuperuser)",
        "",
    ]
    return lines


def _shown_path(path: Path) -> str:
    """Relative to the working directory when below it, as a person would type it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
