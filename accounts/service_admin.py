"""What an admin page whose saves and deletes are a service's shares, so that an operator's change
is the same audited service call as a tenant admin's in the console: the signed-in operator as the
service's ``by``, the admin's own object brought up to date with what the service saved, a bulk
delete made one service call at a time, and the form checked again when another operator's change
got in between the form's checks and the service's write."""

from __future__ import annotations

from typing import Any, ClassVar

from django.contrib import admin
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from accounts.models import User
from core.errors import InvalidInput


def admin_operator(request: HttpRequest) -> User:
    """The staff member making the change; the admin site lets nobody else this far."""
    assert isinstance(request.user, User)
    return request.user


def admin_object_adopt(obj: models.Model, saved: models.Model) -> None:
    """Make the admin's ``obj`` the row the service saved, so the admin's message, change log and
    redirect name what was stored."""
    for field in obj._meta.concrete_fields:
        setattr(obj, field.attname, getattr(saved, field.attname))
    obj._state.adding, obj._state.db = False, saved._state.db


class ServiceAdmin(admin.ModelAdmin):
    """A model admin whose ``save_model`` and ``delete_model`` call services (module docstring)."""

    # What a service raises when another operator's change won the race with this form's checks.
    raced: ClassVar[tuple[type[Exception], ...]] = (InvalidInput,)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset.select_related("tenant"):
            self.delete_model(request, obj)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except self.raced:
            # The admin's transaction was rolled back; checked again, the form now says what is
            # in the way beside its field instead of a server error.
            return super().changeform_view(request, object_id, form_url, extra_context)
