from __future__ import annotations

from django.urls import path

from portal import views

# The namespace keeps the name of the URL prefix these pages have always had (/accounts/...).
app_name = "accounts"

urlpatterns = [
    path("connected/", views.connected_list, name="connected"),
    path("connected/disconnect/", views.connected_disconnect, name="disconnect"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/end/", views.session_end, name="session-end"),
    path("sessions/end-all/", views.session_end_all, name="session-end-all"),
]
