from __future__ import annotations

import os
import secrets
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import Role
from accounts.services import membership_ensure, tenant_ensure, user_ensure
from core.env import env_optional
from data_agent.sample import sample_database_ensure
from language_models.services import language_model_ensure_default

DEMO_TENANTS = [("acme", "Acme"), ("globex", "Globex")]
DEMO_MODEL_NAME = "Demo model"
DEMO_USERS = [("alice", "acme", Role.ADMIN), ("bob", "acme", Role.VIEWER), ("carol", "globex", Role.ADMIN)]


class Command(BaseCommand):
    help = "Create the demo tenants acme and globex and the users alice, bob and carol. Safe to run twice."

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("DEMO_PASSWORD") or ""
        # A litellm model string; the provider's key comes from its usual variable (OPENAI_API_KEY...).
        demo_model = env_optional("DEMO_LLM_MODEL")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        with transaction.atomic():
            tenants = {slug: tenant_ensure(slug=slug, name=name) for slug, name in DEMO_TENANTS}
            created = []
            for username, tenant_slug, role in DEMO_USERS:
                user = user_ensure(username=username, password=password, email=f"{username}@example.com")
                if user.check_password(password):
                    created.append(username)
                membership_ensure(user=user, tenant=tenants[tenant_slug], role=role)
            if demo_model:
                language_model_ensure_default(tenant=tenants["acme"], name=DEMO_MODEL_NAME, model=demo_model)
        # Outside the transaction: the sample database is filled over connections of its own.
        ontology = sample_database_ensure(tenant=tenants["acme"])
        self.stdout.write(
            f"Sample data for acme: ontology {ontology.name!r} ({ontology.status}), id {ontology.pk}."
        )
        self.stdout.write(
            "Demo tenants: acme, globex. Users: alice (acme admin), bob (acme viewer), carol (globex admin)."
        )
        if demo_model:
            self.stdout.write(f"Language model for acme: {demo_model} ({DEMO_MODEL_NAME!r}, the default).")
        if generated and created:
            self.stdout.write(f"Generated password for {', '.join(created)}: {password}")
        elif generated:
            self.stdout.write("Demo users already existed; their passwords were left unchanged.")
