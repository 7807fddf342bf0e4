"""The invitation email: plain text, the link built from ``PUBLIC_URL`` (never from a request's
Host header), sent through Django's configured backend. A mail server that refuses is the
caller's ``Unavailable``, so the invitation it was for is not kept."""

from __future__ import annotations

import logging
import smtplib

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string

from accounts.models import IdentityProvider, Invitation, User
from core.errors import Unavailable
from core.text_safety import text_cleaned

logger = logging.getLogger(__name__)

EMAIL_NOT_SENT = "The invitation email could not be sent: the mail server did not take it. Try again shortly."
SUBJECT_TEMPLATE = "accounts/emails/invitation_subject.txt"
BODY_TEMPLATE = "accounts/emails/invitation_body.txt"


def invitation_email_send(
    *, invitation: Invitation, token: str, by: User, provider: IdentityProvider | None
) -> None:
    context = {
        "invitation": invitation,
        "token": token,
        "public_url": settings.PUBLIC_URL,
        # A name a person chose: nothing in it may reorder or hide the sentence around it.
        "inviter": text_cleaned(by.display_name or by.get_username()),
        "provider_name": provider.name if provider is not None else "",
        "valid_days": settings.INVITATION_VALID_DAYS,
    }
    subject = " ".join(render_to_string(SUBJECT_TEMPLATE, context).split())
    body = render_to_string(BODY_TEMPLATE, context)
    try:
        send_mail(subject, body, None, [invitation.email])
    except (smtplib.SMTPException, OSError) as error:
        # Without the link: it is a credential until it is used.
        logger.warning("Failed to send invitation %s: %s", invitation.pk, type(error).__name__)
        raise Unavailable(EMAIL_NOT_SENT, data={"reason": "email"}) from None
