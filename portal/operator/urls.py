"""Included under ``admin/`` in ``config/urls.py``, ahead of the admin's own URLs: the index (the
admin's, with the dashboard on top; no name of its own, so ``admin:index`` still names it) and the
dashboard's JSON."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from portal.operator import views

urlpatterns = [
    path("", admin.site.admin_view(views.admin_index)),
    path("dashboard.json", views.dashboard_data, name="operator-dashboard-data"),
]
