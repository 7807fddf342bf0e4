from __future__ import annotations

from django.urls import path

from portal import service_clients, views

# The namespace keeps the name of the URL prefix these pages have always had (/accounts/...).
app_name = "accounts"

urlpatterns = [
    path("connected/", views.connected_list, name="connected"),
    path("connected/disconnect/", views.connected_disconnect, name="disconnect"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/end/", views.session_end, name="session-end"),
    path("sessions/end-all/", views.session_end_all, name="session-end-all"),
    path("service-clients/", service_clients.service_client_page, name="service-clients"),
    path("service-clients/create/", service_clients.service_client_add, name="service-client-create"),
    path("service-clients/delete/", service_clients.service_client_remove, name="service-client-delete"),
]
