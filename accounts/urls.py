from __future__ import annotations

from django.urls import path

from accounts import portal

app_name = "accounts"

urlpatterns = [
    path("connected/", portal.connected_list, name="connected"),
    path("connected/disconnect/", portal.connected_disconnect, name="disconnect"),
    path("sessions/", portal.session_list, name="sessions"),
    path("sessions/end/", portal.session_end, name="session-end"),
]
