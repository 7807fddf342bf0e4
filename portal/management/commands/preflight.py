"""Is the port free and does the database answer? One line if not: `make run` asks this first
(``prepare_run`` runs these checks), and ``manage.py preflight`` asks it alone.

Run before migrate, so a newcomer with a wrong ``DATABASE_URL`` or a busy port reads what is wrong
and how to fix it, instead of migrate's traceback followed by a server that starts anyway. System
checks are skipped: they are not what this asks, and some of them would query the very database
that may not be there.
"""

from __future__ import annotations

import errno
import socket
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection

from core.env import env_optional
from core.errors import GatehouseError
from language_models.model_checks import language_model_string_validate

# Daphne binds 127.0.0.1 (Makefile); a server on another interface of the same port is not a clash.
BIND_HOST = "127.0.0.1"
CONNECT_TIMEOUT_SECONDS = 10


class Command(BaseCommand):
    help = "Check that the port is free and the database answers; one line and exit 1 if not."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=settings.PORT, help="The port the server will bind.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            port_check(port=options["port"])
            database_check()
            demo_model_check()
        except CommandError as problem:
            # The message alone, without Django's "CommandError:" prefix: it is the whole answer.
            self.stderr.write(str(problem))
            raise SystemExit(1) from None


def port_check(*, port: int) -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As the server will bind: a port left in TIME_WAIT by the last run is free, a listener is not.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((BIND_HOST, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CommandError(
                f"Port {port} is already in use (another Gatehouse or another server?); stop it, "
                f"or run on another port: make run PORT={port + 1}"
            ) from None
        raise CommandError(f"Cannot listen on {BIND_HOST}:{port}: {exc.strerror}; try PORT=...") from None
    finally:
        probe.close()


def database_check() -> None:
    if connection.vendor == "postgresql":
        # An unreachable host would otherwise hang for the system's TCP timeout, minutes.
        connection.settings_dict.setdefault("OPTIONS", {}).setdefault(
            "connect_timeout", CONNECT_TIMEOUT_SECONDS
        )
    try:
        connection.ensure_connection()
    except DatabaseError as exc:
        raise CommandError(database_problem(str(exc))) from None
    finally:
        connection.close()


def database_problem(error: str) -> str:
    """What a driver's connection error means for the operator, in one line."""
    db = settings.DATABASES["default"]
    name, host, port = db.get("NAME", ""), db.get("HOST") or "localhost", db.get("PORT") or "5432"
    lowered = error.lower()
    if db["ENGINE"].endswith("sqlite3"):
        return f"The SQLite database {name} cannot be opened ({_first_line(error)}); check its folder."
    if "does not exist" in lowered and 'database "' in lowered:
        return (
            f'The database "{name}" does not exist on {host}:{port}; create it (createdb -h {host} -p {port} '
            f"{name}) or fix DATABASE_URL."
        )
    if "resolve" in lowered or "name or service not known" in lowered or "nodename nor servname" in lowered:
        return f'The database host "{host}" is not known; check the host in DATABASE_URL.'
    if "refused" in lowered:
        return (
            f"Nothing answers at {host}:{port} (connection refused); start PostgreSQL there or check the "
            "host and port in DATABASE_URL."
        )
    if "timeout" in lowered or "timed out" in lowered:
        return (
            f"The database at {host}:{port} did not answer in time; check the host and port in DATABASE_URL."
        )
    if "password" in lowered or "authentication" in lowered or "role" in lowered:
        return (
            f"The database at {host}:{port} refused the sign-in ({_first_line(error)}); "
            "check the user and password in DATABASE_URL."
        )
    return f"Cannot connect to the database at {host}:{port}: {_first_line(error)}; check DATABASE_URL."


def demo_model_check() -> None:
    """``DEMO_LLM_MODEL`` (which bootstrap_demo gives acme) must be a model string litellm routes.

    Its key is not asked for: one stored in the admin by an earlier run is kept and used.
    """
    model = env_optional("DEMO_LLM_MODEL")
    if model is None:
        return
    try:
        language_model_string_validate(model=model)
    except GatehouseError as refusal:
        raise CommandError(f"DEMO_LLM_MODEL: {refusal.message}") from None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "no reason given"
