"""Create the demo (portal.demo): for a deployment's first start (platform/compose.yaml) and the
tests. ``make run`` does the same through ``prepare_run``, which also keeps the password in .local/.

``DEMO_PASSWORD`` (or ``DEMO_PASSWORD_FILE``) is the people's password, set on existing people too;
one the password validators refuse stops the command with one line. Without it, people created now
get a generated password, printed once.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from core.env import env_optional
from data_agent.models import OntologyStatus
from portal.demo import (
    DemoPeople,
    demo_ensure,
    demo_model_line,
    demo_password_changed_line,
    demo_password_problems,
    demo_password_refusal,
)
from upstreams.demo import upstream_demo_line


class Command(BaseCommand):
    help = "Create the demo tenants acme and globex and the users alice, bob and carol. Safe to run twice."

    def handle(self, *args: Any, **options: Any) -> None:
        password = env_optional("DEMO_PASSWORD")
        # A litellm model string; the provider's key comes from its usual variable (OPENAI_API_KEY...).
        demo_model = env_optional("DEMO_LLM_MODEL")
        if password is not None:
            problems = demo_password_problems(password=password)
            if problems:
                # The message alone, without Django's "CommandError:" prefix: it is the whole answer.
                self.stderr.write(demo_password_refusal(problems=problems))
                raise SystemExit(1)
        demo = demo_ensure(password=password, reset_existing=True, language_model=demo_model)
        ontology = demo.ontology
        self.stdout.write(
            f"Sample data for acme: ontology {ontology.name!r} ({ontology.status}), id {ontology.pk}."
        )
        if ontology.status != OntologyStatus.READY and ontology.status_detail:
            self.stdout.write(f"  {ontology.status_detail}")
        self.stdout.write(
            f"Workflow for acme: {demo.workflow.name!r}, with the workflows toolset on (docs/workflows.md)."
        )
        self.stdout.write(upstream_demo_line(upstream=demo.upstream))
        self.stdout.write(
            "Demo tenants: acme, globex. Users: alice (acme admin), bob (acme viewer), carol (globex admin)."
        )
        if demo_model:
            self.stdout.write(demo_model_line(model=demo_model))
        self.stdout.write(people_line(people=demo.people))


def people_line(*, people: DemoPeople) -> str:
    """What happened to the people's passwords, in one line."""
    if people.changed:
        return demo_password_changed_line(changed=people.changed)
    if people.generated and people.created:
        return f"Generated password for {', '.join(people.created)}: {people.password}"
    if people.generated:
        return "Demo users already existed; their passwords were left unchanged."
    return "Demo users have the password DEMO_PASSWORD."
