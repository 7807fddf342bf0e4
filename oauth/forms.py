"""The consent form, and the check that its hidden fields still say what the request said.

The consent page posts back to its own URL, so the authorization request the person saw is still
in the query string of the POST. DOT builds the code from the form's hidden fields alone; a person
(or anything driving their browser) editing those could ask for a scope the client never asked
for, or name another client, and DOT would look the client up and fail with a 500. So the fields
are compared with the query first (``consent_form_altered``), and any difference is refused.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict
from oauth2_provider.forms import AllowForm
from oauth2_provider.scopes import get_scopes_backend

from accounts.models import Tenant, User
from accounts.selectors import membership_list_for_user

# The hidden fields the page copied, unchanged, from the authorization request's query string.
_COPIED_FIELDS = (
    "client_id",
    "redirect_uri",
    "response_type",
    "state",
    "code_challenge",
    "code_challenge_method",
    "nonce",
    "claims",
)


class ConsentForm(AllowForm):
    """DOT's allow form plus the tenant the token will belong to.

    The choices are the user's own tenants, so another tenant's slug fails validation.
    """

    tenant = forms.ModelChoiceField(
        queryset=Tenant.objects.none(), to_field_name="slug", empty_label=None, widget=forms.RadioSelect
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tenant_field = self.fields["tenant"]
        assert isinstance(tenant_field, forms.ModelChoiceField)
        tenant_field.queryset = Tenant.objects.filter(
            pk__in=membership_list_for_user(user=user).values("tenant_id"), is_active=True
        )


def consent_form_altered(*, form: ConsentForm, query: QueryDict) -> str | None:
    """The first field of a valid consent form that differs from the request it was shown for
    (``"request"`` when the POST carries no request at all), else None."""
    if not query.get("client_id"):
        return "request"
    data = form.cleaned_data
    for name in _COPIED_FIELDS:
        # A parameter the request left out was filled by DOT (the client's only redirect URI).
        if name in query and str(data.get(name) or "").strip() != query.get(name, "").strip():
            return name
    if "scope" in query:
        requested = set(query.get("scope", "").split())
    else:
        requested = set(get_scopes_backend().get_default_scopes())
    # Fewer scopes than asked for is the person's right (DOT's form allows it); more is not.
    if not set(str(data.get("scope") or "").split()) <= requested:
        return "scope"
    if "resource" in query and set(str(data.get("resource") or "").split()) != set(query.getlist("resource")):
        return "resource"
    return None
