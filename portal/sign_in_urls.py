from __future__ import annotations

from django.urls import path

from portal import sign_in

urlpatterns = [
    path("", sign_in.sign_in_by_email, name="sign-in-organisation"),
    path("callback/", sign_in.sign_in_callback, name="sign-in-callback"),
    path("<slug:slug>/", sign_in.sign_in_with_tenant, name="sign-in-tenant"),
]
