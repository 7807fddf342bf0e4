"""Password reset for local accounts (``/accounts/password-reset/...``): Django's own views, form
and token generator, throttled per client address and per email address asked for, audited, with
the link built from ``PUBLIC_URL`` (never from the request's Host header).

Whether an address has an account changes nothing anyone but an operator sees: the same page, status
and message, the same refusal when a limit is reached, and an audit row (``password.reset_requested``)
that says how many accounts were found only in its detail, with no user or tenant to find it by.

A reset ends more than the old password: the person's OAuth tokens and MCP sessions too
(``portal.access.person_clients_disconnect``), since whoever knew the old password may have
connected a client with it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordResetForm, SetPasswordForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.urls import reverse_lazy

from core.audit.trail import audit_record
from core.errors import RateLimited
from core.models import AuditAction, RateLimitScope
from core.text_safety import text_invisible_character
from core.throttles import client_address, throttle_check
from oauth.parameter_guard import request_unsafe_parameter
from oauth.services import BY_PASSWORD_RESET
from portal.access import person_clients_disconnect

PASSWORD_RESET_THROTTLED = "Too many password reset requests. Wait {seconds} seconds, then try again."
EMAIL_INVISIBLE_CHARACTER = (
    "The email address contains an invisible or control character ({code}). Type it again."
)
# Django's PasswordResetForm field; also the most of an address the throttle and the audit keep.
EMAIL_MAX_LENGTH = 254


def email_visible_validate(value: str) -> None:
    # Django's email validator lets these through in the domain part (it accepts any non-ASCII
    # there, for internationalised names), where they would make an address that only looks right.
    code = text_invisible_character(value)
    if code is not None:
        raise ValidationError(EMAIL_INVISIBLE_CHARACTER.format(code=code), code="invisible_character")


class PasswordResetRequestForm(PasswordResetForm):
    email = forms.EmailField(
        label="Email",
        max_length=EMAIL_MAX_LENGTH,
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
        validators=[email_visible_validate],
    )


def duration_words(seconds: int) -> str:
    """``3600`` as "1 hour", ``5400`` as "90 minutes": how long a link lasts, in a sentence."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"


def password_reset_throttle(*, request: HttpRequest, email: str) -> None:
    """Count a request against the client address and against the address asked for; each meets
    the limit alone (raises RateLimited), so neither one address asking for many accounts nor many
    addresses asking for one get far."""
    throttle_check(request=request, scope=RateLimitScope.PASSWORD_RESET, key=f"address|{client_address()}")
    asked_for = email.strip().lower()[:EMAIL_MAX_LENGTH]
    throttle_check(request=request, scope=RateLimitScope.PASSWORD_RESET, key=f"email|{asked_for}")


def password_reset_send(*, form: PasswordResetForm) -> int:
    """Email a single-use link to each account Django's form picks for the address (active, with a
    usable password); how many there were, for the audit trail. A mail server that refuses is
    logged by Django's form and changes nothing in the answer."""
    found = sum(1 for _ in form.get_users(form.cleaned_data["email"]))
    public = urlsplit(settings.PUBLIC_URL)
    form.save(
        # The link and the site's name come from PUBLIC_URL: a forged Host header cannot send
        # someone a link to another site.
        domain_override=public.netloc,
        use_https=public.scheme == "https",
        subject_template_name="registration/password_reset_subject.txt",
        email_template_name="registration/password_reset_email.txt",
        extra_email_context={
            "public_url": settings.PUBLIC_URL,
            "expires_in": duration_words(settings.PASSWORD_RESET_TIMEOUT),
        },
    )
    return found


class PasswordResetView(auth_views.PasswordResetView):
    form_class = PasswordResetRequestForm
    success_url = reverse_lazy("accounts:password-reset-done")

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # A NUL or invalid UTF-8 would reach the account lookup (PostgreSQL refuses NUL with a
        # 500); the form says what is wrong instead, as the sign-in page does.
        problem = request_unsafe_parameter(request)
        if problem is not None:
            messages.error(request, problem)
            return self.render_to_response(self.get_context_data(form=self.form_class()), status=400)
        return super().dispatch(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        email = str(request.POST.get("email", ""))
        try:
            password_reset_throttle(request=request, email=email)
        except RateLimited as refusal:
            return self.throttled(email=email, refusal=refusal)
        return super().post(request, *args, **kwargs)

    def throttled(self, *, email: str, refusal: RateLimited) -> HttpResponse:
        form = self.form_class(initial={"email": email[:EMAIL_MAX_LENGTH]})
        messages.error(self.request, PASSWORD_RESET_THROTTLED.format(seconds=refusal.retry_after_seconds))
        response = self.render_to_response(self.get_context_data(form=form), status=429)
        response["Retry-After"] = str(refusal.retry_after_seconds)
        return response

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        found = password_reset_send(form=form)
        audit_record(
            action=AuditAction.PASSWORD_RESET_REQUESTED,
            detail={"email": form.cleaned_data["email"], "accountsFound": found},
        )
        return HttpResponseRedirect(self.get_success_url())


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {
            **super().get_context_data(**kwargs),
            "expires_in": duration_words(settings.PASSWORD_RESET_TIMEOUT),
        }


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's: the link's token goes into the session at once and leaves the address bar; an
    expired, used or malformed link shows the page that says so (``validlink`` false)."""

    success_url = reverse_lazy("accounts:password-reset-complete")

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        problem = request_unsafe_parameter(request)
        if problem is not None:
            messages.error(request, problem)
            form = self.get_form_class()(user=self.user)
            return self.render_to_response(self.get_context_data(form=form), status=400)
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: SetPasswordForm) -> HttpResponse:
        response = super().form_valid(form)
        ended = person_clients_disconnect(user=form.user, by=BY_PASSWORD_RESET)
        audit_record(
            action=AuditAction.PASSWORD_RESET,
            user=form.user,
            detail={
                "access_tokens_revoked": ended.access_tokens,
                "refresh_tokens_revoked": ended.refresh_tokens,
                "mcp_sessions_ended": ended.mcp_sessions,
            },
        )
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {
            **super().get_context_data(**kwargs),
            "expires_in": duration_words(settings.PASSWORD_RESET_TIMEOUT),
        }
