"""The page an invitation's link opens (``/accounts/invitations/<token>/``): what the invitation is
for, and the one step between the visitor and accepting it (``accounts.invitations``).

- In a tenant that requires its identity provider, a link to sign in through it, which comes back
  here (``/accounts/sso/<tenant>/?next=...``); then the button that accepts.
- Signed in to the account of the invited address: the button that accepts (POST).
- Signed in to another account: a refusal that says to sign in with the invited address.
- Nobody signed in: a form that creates an account with the invited address (Django's password
  validators), accepts and signs in; or the sign-in page, which comes back here.

Nothing on it depends on whether an address has an account: the same page for every visitor who
is not signed in, and a new username may not be an email address (the username taken or not would
tell). A malformed, unknown, expired, used or withdrawn link is this page's own refusal, never a
500; the person who accepted a link and opens it again is sent to their home page.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm, UsernameField
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts.invitations.selectors import (
    AcceptanceStep,
    identity_provider_required_by,
    invitation_acceptance_step,
    invitation_get_by_token,
)
from accounts.invitations.services import (
    EMAIL_MISMATCH,
    InvitationUnusable,
    invitation_accept,
    invitation_accept_new_account,
    invitation_unusable_reason,
)
from accounts.models import Invitation, User
from core.audit.trail import audit_record
from core.errors import GatehouseError, InvalidInput, NotFound
from core.models import AuditAction
from core.text_safety import text_cleaned
from oauth.parameter_guard import request_unsafe_parameter

USERNAME_IS_EMAIL = "A username is not an email address: choose one without “@”."
TEMPLATE = "accounts/invitation.html"
REFUSED_TEMPLATE = "accounts/invitation_refused.html"
BACKEND = "django.contrib.auth.backends.ModelBackend"


class InvitationSignUpForm(UserCreationForm):
    """Django's: username and password twice, the password checked by every validator against
    the account it will be (with the invited address)."""

    class Meta:
        model = User
        fields = ("username",)
        field_classes = {"username": UsernameField}

    def clean_username(self) -> str:
        username = self.cleaned_data.get("username")
        if username and "@" in username:
            raise forms.ValidationError(USERNAME_IS_EMAIL, code="username_is_email")
        return super().clean_username()


def _person(request: HttpRequest) -> User | None:
    return request.user if isinstance(request.user, User) else None


def _refused(request: HttpRequest, error: GatehouseError) -> HttpResponse:
    return render(request, REFUSED_TEMPLATE, {"message": error.message}, status=error.http_status)


def _page(
    request: HttpRequest,
    invitation: Invitation,
    *,
    form: InvitationSignUpForm | None = None,
    status: int = 200,
) -> HttpResponse:
    person = _person(request)
    provider = identity_provider_required_by(tenant=invitation.tenant)
    step = invitation_acceptance_step(invitation=invitation, user=person, provider=provider)
    here = request.path
    inviter = invitation.invited_by
    context: dict[str, Any] = {
        "invitation": invitation,
        "inviter": text_cleaned(inviter.display_name or inviter.get_username()) if inviter else "",
        "provider": provider,
        "step": step.value,
        "form": form or InvitationSignUpForm(instance=User(email=invitation.email)),
        "sign_in_url": f"{reverse('login')}?{urlencode({'next': here})}",
        "provider_url": (
            f"{reverse('sign-in-tenant', args=[invitation.tenant.slug])}?{urlencode({'next': here})}"
        ),
    }
    if step is AcceptanceStep.OTHER_ACCOUNT:
        # A refusal, though the page still shows what the invitation is for and how to sign out.
        context["mismatch"] = EMAIL_MISMATCH.format(email=invitation.email)
        status = 403 if status == 200 else status
    return render(request, TEMPLATE, context, status=status)


def _usable(request: HttpRequest, token: str) -> Invitation | HttpResponse:
    """The invitation the link names if it can still be accepted, else the answer to give."""
    try:
        invitation = invitation_get_by_token(token=token)
    except NotFound as error:
        return _refused(request, error)
    refusal = invitation_unusable_reason(invitation=invitation)
    if refusal is None:
        return invitation
    return _gone(request, invitation, refusal)


def _gone(request: HttpRequest, invitation: Invitation, refusal: InvitationUnusable) -> HttpResponse:
    person = _person(request)
    if person is not None and invitation.accepted_by_id == person.pk:
        # Theirs already (a second click, the link opened again): where a member goes.
        return redirect("home")
    return _refused(request, refusal)


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def invitation_page(request: HttpRequest, token: str) -> HttpResponse:
    problem = request_unsafe_parameter(request)
    if problem is not None:
        return render(request, REFUSED_TEMPLATE, {"message": problem}, status=400)
    found = _usable(request, token)
    if isinstance(found, HttpResponse):
        return found
    if request.method != "POST":
        return _page(request, found)
    person = _person(request)
    if person is not None:
        return _accept(request, found, token=token, person=person)
    return _sign_up(request, found, token=token)


def _accept(request: HttpRequest, invitation: Invitation, *, token: str, person: User) -> HttpResponse:
    try:
        invitation_accept(token=token, user=person)
    except InvitationUnusable as refusal:
        invitation.refresh_from_db()
        return _gone(request, invitation, refusal)
    except GatehouseError as error:
        return _refused(request, error)
    return redirect("home")


def _sign_up(request: HttpRequest, invitation: Invitation, *, token: str) -> HttpResponse:
    form = InvitationSignUpForm(request.POST, instance=User(email=invitation.email))
    if not form.is_valid():
        return _page(request, invitation, form=form, status=400)
    try:
        accepted = invitation_accept_new_account(token=token, account=form.save(commit=False))
    except InvalidInput as error:
        form.add_error("username", error.message)
        return _page(request, invitation, form=form, status=400)
    except GatehouseError as error:
        return _refused(request, error)
    account = accepted.membership.user
    login(request, account, backend=BACKEND)
    audit_record(
        action=AuditAction.LOGIN_SUCCEEDED,
        user=account,
        tenant=invitation.tenant,
        detail={"via": "invitation", "created": True},
    )
    return HttpResponseRedirect(reverse("home"))
