from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from portal import invitations, members, password_reset, service_clients, views

# The namespace keeps the name of the URL prefix these pages have always had (/accounts/...).
app_name = "accounts"

urlpatterns = [
    path("connected/", views.connected_list, name="connected"),
    path("connected/disconnect/", views.connected_disconnect, name="disconnect"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/end/", views.session_end, name="session-end"),
    path("sessions/end-all/", views.session_end_all, name="session-end-all"),
    # Moved into the console (portal.console.clients); the old addresses send people there.
    path("service-clients/", service_clients.service_clients_moved, name="service-clients"),
    path("service-clients/create/", service_clients.service_clients_moved, name="service-client-create"),
    path("service-clients/delete/", service_clients.service_clients_moved, name="service-client-delete"),
    path("members/", members.member_page, name="members"),
    path("members/invite/", members.invitation_send, name="member-invite"),
    path("members/invitations/revoke/", members.invitation_cancel, name="invitation-revoke"),
    path("members/role/", members.member_role_set, name="member-role"),
    path("members/remove/", members.member_delete, name="member-remove"),
    path("invitations/<str:token>/", invitations.invitation_page, name="invitation"),
    path("password-reset/", password_reset.PasswordResetView.as_view(), name="password-reset"),
    path("password-reset/sent/", password_reset.PasswordResetDoneView.as_view(), name="password-reset-done"),
    path(
        "password-reset/complete/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password-reset-complete",
    ),
    path(
        "password-reset/<uidb64>/<token>/",
        password_reset.PasswordResetConfirmView.as_view(),
        name="password-reset-confirm",
    ),
]
