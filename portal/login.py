"""Sign-in pages (``/accounts/login/`` and ``/admin/login/``): Django's LoginView, throttled per
address and username, with every attempt in the audit trail."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.contrib import admin, messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from oauth2_provider.models import Application

from accounts.models import User
from accounts.selectors import identity_provider_required_for
from core.audit.trail import audit_record
from core.errors import RateLimited
from core.models import AuditAction, AuditOutcome, RateLimitScope
from core.throttles import client_address, throttle_check
from oauth.parameter_guard import request_unsafe_parameter
from oauth.selectors import application_find

LOGIN_THROTTLED = "Too many sign-in attempts. Wait {seconds} seconds, then try again."
PROVIDER_REQUIRED = "{tenant} signs its people in through {provider}: use “Sign in with your organisation”."


class _ProviderRequired:
    """A tenant that requires its identity provider refuses its members' passwords (operators,
    who stand outside any tenant's policy, keep theirs)."""

    def confirm_login_allowed(self, user: User) -> None:
        super().confirm_login_allowed(user)  # type: ignore[misc]
        provider = None if user.is_superuser else identity_provider_required_for(user=user)
        if provider is not None:
            raise ValidationError(
                PROVIDER_REQUIRED.format(tenant=provider.tenant.name, provider=provider.name),
                code="identity_provider_required",
            )


class PasswordSignInForm(_ProviderRequired, AuthenticationForm):
    pass


class AdminPasswordSignInForm(_ProviderRequired, AdminAuthenticationForm):
    pass


def login_throttle_key(*, ip: str, username: str) -> str:
    # Per address and account: one address guessing many accounts, or many addresses guessing
    # one, each meet a limit, while a person's own typos only use up their own budget.
    return f"{ip}|{username.strip().lower()}"


class LoginView(auth_views.LoginView):
    authentication_form: type[AuthenticationForm] = PasswordSignInForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # A NUL or invalid UTF-8 in the username, the password or ``next`` would fail the first
        # lookup with a 500; the form says what is wrong instead (oauth.parameter_guard).
        problem = request_unsafe_parameter(request)
        if problem is not None:
            return self.unusable(problem=problem)
        return super().dispatch(request, *args, **kwargs)

    def unusable(self, *, problem: str) -> HttpResponse:
        # An unbound form: the posted values are what cannot be used, so none is shown again.
        form = self.get_form_class()(request=self.request)
        messages.error(self.request, problem)
        return self.render_to_response(self.get_context_data(form=form), status=400)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = str(request.POST.get("username", ""))[:150]
        try:
            throttle_check(
                request=request,
                scope=RateLimitScope.LOGIN,
                key=login_throttle_key(ip=client_address(), username=username),
                username=username,
            )
        except RateLimited as refusal:
            return self.throttled(username=username, refusal=refusal)
        return super().post(request, *args, **kwargs)

    def throttled(self, *, username: str, refusal: RateLimited) -> HttpResponse:
        # An unbound form: validating the posted one would check the password after all.
        form = self.get_form_class()(request=self.request, initial={"username": username})
        messages.error(self.request, LOGIN_THROTTLED.format(seconds=refusal.retry_after_seconds))
        response = self.render_to_response(self.get_context_data(form=form), status=429)
        response["Retry-After"] = str(refusal.retry_after_seconds)
        return response

    def signing_in_for(self) -> Application | None:
        """The OAuth client whose authorization request sent the person here, if one did."""
        next_url = urlsplit(self.get_redirect_url())
        if next_url.path != reverse("oauth2_provider:authorize"):
            return None
        return application_find(client_id=parse_qs(next_url.query).get("client_id", [""])[0])

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_valid(form)
        audit_record(
            action=AuditAction.LOGIN_SUCCEEDED, user=form.get_user(), application=self.signing_in_for()
        )
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        errors = form.errors.as_data().get("__all__", []) if form is not None and form.is_bound else []
        # Said as it is: the generic "did not match" would send the person to reset a password.
        context["provider_required"] = next(
            (" ".join(e.messages) for e in errors if e.code == "identity_provider_required"), ""
        )
        return context

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        username = str(form.data.get("username", ""))[:150]
        audit_record(
            action=AuditAction.LOGIN_FAILED,
            outcome=AuditOutcome.DENIED,
            user=_user_named(username),
            username=username,
            application=self.signing_in_for(),
            detail={"reasons": _error_codes(form)},
        )
        return super().form_invalid(form)


def _error_codes(form: AuthenticationForm) -> list[str]:
    return sorted({error.code or "invalid" for errors in form.errors.as_data().values() for error in errors})


def _user_named(username: str) -> User | None:
    if not username:
        return None
    return User.objects.filter(**{User.USERNAME_FIELD: username}).first()


class AdminLoginView(LoginView):
    """What ``AdminSite.login`` does, on the throttled and audited view."""

    template_name = "admin/login.html"
    authentication_form = AdminPasswordSignInForm

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method == "GET" and admin.site.has_permission(request):
            return HttpResponseRedirect(reverse("admin:index", current_app=admin.site.name))
        request.current_app = admin.site.name
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(
            admin.site.each_context(self.request),
            title=_("Log in"),
            subtitle=None,
            app_path=self.request.get_full_path(),
            username=self.request.user.get_username(),
        )
        if (
            self.redirect_field_name not in self.request.GET
            and self.redirect_field_name not in self.request.POST
        ):
            context[self.redirect_field_name] = reverse("admin:index", current_app=admin.site.name)
        return context
