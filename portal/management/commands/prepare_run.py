"""``make run``: checks, then only what is not done yet, the banner, and (``--serve``) the server.

All in one process (portal.run_prepare says why): a DEMO_PASSWORD the password validators refuse, a
DEMO_LLM_MODEL litellm cannot route, a busy port and a database that does not answer (checked as
``preflight`` checks them) each stop it with one line and exit 1, before anything changes. Then
migrate, collectstatic and the demo, each skipped when already done, how to sign in, and Daphne
serving config.asgi as it would in a process of its own: Django's start (imports, app loading) is
paid once instead of twice. Beside Daphne, a ``manage.py jobs_worker`` child runs the job steps;
the two stop together (portal.run_worker).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from daphne.cli import CommandLineInterface
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from core.env import env_optional
from core.errors import InvalidInput
from portal.demo import demo_password_problems, demo_password_refusal
from portal.management.commands.preflight import BIND_HOST, database_check, demo_model_check, port_check
from portal.run_prepare import (
    database_migrate_if_needed,
    run_banner,
    run_demo_ensure,
    run_summary,
    static_collect_if_changed,
)
from portal.run_worker import run_worker_start, run_worker_stop


class Command(BaseCommand):
    help = (
        "Before `make run` starts the server: check the port and database, migrate and collect static "
        "files when needed, create the demo where missing, and print how to sign in."
    )
    # Run in handle, after preflight's: before them, a missing database would not be the one line.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=settings.PORT, help="The port the server will bind.")
        parser.add_argument(
            "--serve",
            action="store_true",
            help="Then start the server (Daphne) here and a jobs worker beside it, as make run does.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        given = env_optional("DEMO_PASSWORD")
        # A litellm model string; the provider's key comes from its usual variable (OPENAI_API_KEY...).
        demo_model = env_optional("DEMO_LLM_MODEL")
        password_file = Path(settings.DEMO_PASSWORD_KEPT_FILE)
        try:
            # First: it changes nothing and needs neither the port nor the database.
            if given is not None and (problems := demo_password_problems(password=given)):
                raise CommandError(demo_password_refusal(problems=problems))
            # A DEMO_LLM_MODEL litellm cannot route: refused here too, before anything changes.
            demo_model_check()
            port_check(port=options["port"])
            database_check()
            # Django's system checks, as migrate and bootstrap_demo ran them here before: an error
            # stops the start with Django's list, warnings are shown.
            self.check()
            migrated = database_migrate_if_needed()
            collected = static_collect_if_changed()
            sign_in = run_demo_ensure(given=given, path=password_file, language_model=demo_model)
        except (CommandError, InvalidInput) as problem:
            # The message alone, without Django's "CommandError:" prefix: it is the whole answer.
            self.stderr.write(str(problem))
            raise SystemExit(1) from None
        lines = run_summary(
            migrated=migrated, collected=collected, sign_in=sign_in, language_model=demo_model
        )
        lines += run_banner(
            public_url=settings.PUBLIC_URL,
            sign_in=sign_in,
            password_file=password_file,
            manage=manage_command(),
        )
        # The blank line last sets the banner apart from the server's own log lines.
        self.stdout.write("\n".join(lines) + "\n")
        if options["serve"]:
            self.stdout.flush()
            serve(port=options["port"])


def serve(*, port: int) -> None:
    """Daphne, as ``daphne -v 0 -b 127.0.0.1 -p PORT config.asgi:application`` starts it, in this
    process: Django is set up already, which is half of a warm start's time."""
    # The server's threads open their own connections; this one's work is done.
    connections.close_all()
    worker = run_worker_start()
    try:
        # -v 0: Daphne's access log is plain text with query strings (OAuth codes); Gatehouse logs JSON.
        CommandLineInterface().run(["-v", "0", "-b", BIND_HOST, "-p", str(port), "config.asgi:application"])
    finally:
        run_worker_stop(worker)
    if worker.died.is_set():
        raise SystemExit(1)


def manage_command() -> str:
    """This interpreter and manage.py as a person would type them here: ``.venv/bin/python manage.py``."""
    python = os.path.relpath(sys.executable)
    return f"{sys.executable if python.startswith('..') else python} manage.py"
