"""What the conversation page tests share: conversations and turns written with the ORM (no
factories: the conversations app may grow its own), and reading a page as a person sees it."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.utils import timezone

from accounts.models import User
from conversations.models import Conversation, Turn, TurnKind

LIST = "/conversations/"
HTML = {"HTTP_ACCEPT": "text/html"}


def conversation_make(
    *, user: User, tenant: Any, topic: str = "", minutes_ago: int = 0, **fields: Any
) -> Conversation:
    moment = timezone.now() - timedelta(minutes=minutes_ago)
    return Conversation.objects.create(user=user, tenant=tenant, topic=topic, updated=moment, **fields)


def turn_make(conversation: Conversation, **fields: Any) -> Turn:
    defaults: dict[str, Any] = {"kind": TurnKind.COMMAND, "request": "list customers", "success": True}
    return Turn.objects.create(conversation=conversation, **(defaults | fields))


def visible_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def table_rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [visible_text(row).strip() for row in body.split("</tr>")[:-1]]


def command_output(**fields: Any) -> dict[str, Any]:
    return {
        "success": True,
        "workflow_name": "Sales",
        "context": "sales",
        "command_name": "sales/ListCustomers",
        "command_parameters": {"country": "FR"},
        "command_responses": [
            {
                "response": "2 customers.",
                "artifacts": {"columns": ["name", "country"], "rows": [["Ana", "FR"], ["Bo", "FR"]]},
                "next_actions": ["sales/ShowCustomer"],
                "recommendations": ["Filter by city next."],
            }
        ],
    } | fields
