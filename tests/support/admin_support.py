"""What the admin tests share: URLs by model and view, posting a changelist action."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.utils import quote
from django.db.models import Model
from django.test import Client
from django.urls import reverse


def admin_url(model: type[Model], view: str, *args: Any) -> str:
    # The admin quotes primary keys in its URLs ("_" and ":" become "_5F" and "_3A") and unquotes
    # them on the way in: a text key such as a session binding's must be quoted as the admin does.
    quoted = [quote(arg) if isinstance(arg, str) else arg for arg in args]
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=quoted)


def post_action(client: Client, model: type[Model], action: str, objects: list[Model]) -> Any:
    return client.post(
        admin_url(model, "changelist"),
        {"action": action, "_selected_action": [obj.pk for obj in objects]},
        follow=True,
    )
