"""The demo: tenants acme and globex, the people alice, bob and carol, acme's sample data and
(optionally) its language model, globex's demo upstream MCP server (``upstreams.demo``), and both
tenants' libraries of papers (``research.demo``).
``bootstrap_demo`` and ``make run`` (``prepare_run``) create it.

Safe to run on every start, and cheap when everything exists: what is there is left as it is. The
one exception is the people's password when the operator gives one (``DEMO_PASSWORD``): that is the
documented way to set it on an existing install. Checking a password costs a deliberately slow hash
(PBKDF2, about half a second each), so existing people's passwords are checked only then.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import transaction

from accounts.models import Role, Tenant, User
from accounts.services import membership_ensure, tenant_ensure, user_ensure
from data_agent.models import Ontology
from data_agent.sample import sample_database_ensure
from language_models.services import language_model_ensure_default
from research.demo import research_demo_ensure
from upstreams.demo import upstream_demo_register
from upstreams.models import Upstream
from workflows.demo import workflow_demo_ensure
from workflows.models import Workflow

DEMO_TENANTS = [("acme", "Acme"), ("globex", "Globex")]
DEMO_MODEL_NAME = "Demo model"
DEMO_USERS = [("alice", "acme", Role.ADMIN), ("bob", "acme", Role.VIEWER), ("carol", "globex", Role.ADMIN)]
DEMO_USERNAMES = tuple(username for username, _, _ in DEMO_USERS)
DEMO_PEOPLE = "alice (acme admin), bob (acme viewer) or carol (globex admin)"


@dataclass(frozen=True)
class DemoPeople:
    # What the people created or changed now have: the one given, else a generated one.
    password: str
    generated: bool
    created: tuple[str, ...]
    # Existing people whose password differed from the one given and was set to it.
    changed: tuple[str, ...]


@dataclass(frozen=True)
class Demo:
    people: DemoPeople
    ontology: Ontology
    workflow: Workflow
    upstream: Upstream


def demo_password_problems(*, password: str) -> list[str]:
    """Why the demo people cannot have this password (AUTH_PASSWORD_VALIDATORS, for each of them);
    empty when they can."""
    if "\x00" in password:
        # A sign-in form refuses NUL characters, so nobody could ever type this password in.
        return ["It contains a NUL character."]
    try:
        password.encode("utf-8")
    except UnicodeEncodeError:
        return ["It is not valid UTF-8."]
    problems: list[str] = []
    for username in DEMO_USERNAMES:
        try:
            validate_password(password, user=User(username=username, email=_email(username)))
        except ValidationError as exc:
            problems.extend(message for message in exc.messages if message not in problems)
    return problems


def demo_password_refusal(*, problems: list[str]) -> str:
    """The one line that stops a start whose DEMO_PASSWORD the validators refuse."""
    return (
        f"DEMO_PASSWORD is refused: {' '.join(problems)} Choose another, or leave DEMO_PASSWORD unset "
        "for a generated one."
    )


def demo_ensure(*, password: str | None, reset_existing: bool, language_model: str | None) -> Demo:
    """The demo, created where missing. People created now get ``password`` (a generated one if
    None); with ``reset_existing``, existing people whose password differs get it too."""
    people_password = password or secrets.token_urlsafe(12)
    with transaction.atomic():
        tenants = {slug: tenant_ensure(slug=slug, name=name) for slug, name in DEMO_TENANTS}
        created, changed = _people_ensure(
            tenants=tenants, password=people_password, reset_existing=reset_existing and password is not None
        )
        if language_model:
            language_model_ensure_default(tenant=tenants["acme"], name=DEMO_MODEL_NAME, model=language_model)
        for tenant in tenants.values():
            research_demo_ensure(tenant=tenant)
    # Outside the transaction: the sample database is filled over connections of its own.
    ontology = sample_database_ensure(tenant=tenants["acme"])
    # Over the sample database's ontology, so after it.
    workflow = workflow_demo_ensure(tenant=tenants["acme"])
    # Outside the transaction too: listing its tools starts the demo server.
    upstream = upstream_demo_register(tenant=tenants["globex"])
    people = DemoPeople(
        password=people_password, generated=password is None, created=tuple(created), changed=tuple(changed)
    )
    return Demo(people=people, ontology=ontology, workflow=workflow, upstream=upstream)


def _people_ensure(
    *, tenants: dict[str, Tenant], password: str, reset_existing: bool
) -> tuple[list[str], list[str]]:
    existing = {user.username: user for user in User.objects.filter(username__in=DEMO_USERNAMES)}
    created, changed = [], []
    for username, tenant_slug, role in DEMO_USERS:
        user = existing.get(username)
        if user is None:
            user = user_ensure(username=username, password=password, email=_email(username))
            created.append(username)
        elif reset_existing and not user.check_password(password):
            user.set_password(password)
            user.save(update_fields=["password"])
            changed.append(username)
        membership_ensure(user=user, tenant=tenants[tenant_slug], role=role)
    return created, changed


def _email(username: str) -> str:
    return f"{username}@example.com"


def names_joined(names: tuple[str, ...] | list[str]) -> str:
    """``alice``, ``alice and bob``, ``alice, bob and carol``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def demo_password_changed_line(*, changed: tuple[str, ...]) -> str:
    """What ``DEMO_PASSWORD`` did to existing people, as bootstrap_demo and make run say it."""
    return f"DEMO_PASSWORD: changed the password of {names_joined(changed)}."


def demo_model_line(*, model: str) -> str:
    """The language model the demo gave acme, as bootstrap_demo and make run say it."""
    return f"Language model for acme: {model} ({DEMO_MODEL_NAME!r}, the default)."
