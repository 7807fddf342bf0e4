from __future__ import annotations

from typing import Any

from django import forms
from oauth2_provider.forms import AllowForm

from accounts.models import Tenant, User
from accounts.selectors import membership_list_for_user


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
