"""What the password reset tests share: the pages' paths and texts, and the steps a person takes
(ask for a link, read it from the email, set a password), done through Django's test client."""

from __future__ import annotations

import html
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils.http import urlsafe_base64_encode

from accounts.models import User
from core import request_context as request_context_module
from core.models import AuditAction, AuditEvent
from core.request_context import RequestContext

if TYPE_CHECKING:
    # What the test client answers, in django-stubs' words.
    from django.test.client import _MonkeyPatchedWSGIResponse as Response


RESET = reverse("accounts:password-reset")
SENT = reverse("accounts:password-reset-done")
COMPLETE = reverse("accounts:password-reset-complete")
NEW_PASSWORD = "a-new-and-longer-passphrase-42"
# The confirm page's headings (templates/registration/password_reset_confirm.html).
INVALID_LINK = "This link cannot be used"
CHOOSE = "Choose a new password"
# Django's own form errors.
NOT_AN_EMAIL = "Enter a valid email address."
TOO_LONG = "Ensure this value has at most 254 characters"
LIMIT = 2
_LINK = re.compile(r"^(https?://\S+/accounts/password-reset/[^/\s]+/[^/\s]+/)$", re.MULTILINE)


@contextmanager
def requests_from(address: str) -> Iterator[None]:
    """Requests made inside come from ``address``, as core.request_context's middleware would say.
    That middleware wraps the ASGI application, outside Django, so the test client never runs it:
    this sets what it sets, reaching into the module's context variable on purpose."""
    token = request_context_module._current.set(
        RequestContext(request_id=f"test-{secrets.token_hex(6)}", ip=address)
    )
    try:
        yield
    finally:
        request_context_module._current.reset(token)


def spare_address() -> str:
    # 198.18.0.0/15 is for benchmarks, never a real client.
    return f"198.18.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"


def ask(client: Client, email: str, *, host: str | None = None) -> Response:
    return client.post(RESET, {"email": email}, headers={"Host": host} if host else None)


def ask_raw(client: Client, body: str) -> Response:
    """A form body exactly as given: percent-escapes a browser would never send included."""
    return client.post(RESET, data=body, content_type="application/x-www-form-urlencoded")


def emailed_link(message: mail.EmailMessage) -> str:
    [link] = _LINK.findall(str(message.body))
    return link


def password_form_path(client: Client, link: str) -> str:
    """Open a reset link as a browser does: the address of the new password's form it leads to."""
    return client.get(urlsplit(link).path)["Location"]


def set_password(client: Client, form_path: str, password: str = NEW_PASSWORD) -> Response:
    return client.post(form_path, {"new_password1": password, "new_password2": password})


def text(response: Response) -> str:
    """The page as a person reads its text: entities (``&#x27;``) unescaped."""
    return html.unescape(response.content.decode())


def page(response: Response) -> str:
    """The page without what differs between any two answers: the CSP nonce and the CSRF token."""
    text = response.content.decode()
    text = re.sub(r'nonce="[^"]*"', 'nonce=""', text)
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', 'name="csrfmiddlewaretoken"', text)


def requested_rows() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AuditAction.PASSWORD_RESET_REQUESTED).order_by("id"))


class GeneratorAt(PasswordResetTokenGenerator):
    """Django's token generator with its clock at ``moment``: a link made then. Django's own tests
    set the clock the same way (its ``_now`` hook)."""

    def __init__(self, moment: datetime) -> None:
        super().__init__()
        self.moment = moment

    def _now(self) -> datetime:
        return self.moment


def confirm_path(user: User, token: str) -> str:
    uidb64 = urlsafe_base64_encode(str(user.pk).encode())
    return reverse("accounts:password-reset-confirm", kwargs={"uidb64": uidb64, "token": token})


def link_made_ago(user: User, seconds: int) -> str:
    # Django's generator reads the same naive local clock (PasswordResetTokenGenerator._now).
    return confirm_path(user, GeneratorAt(datetime.now() - timedelta(seconds=seconds)).make_token(user))
