from __future__ import annotations

from django.urls import path

from portal.console import members, overview

app_name = "console"

urlpatterns = [
    path("", overview.console_home, name="home"),
    path("<slug:slug>/", overview.overview, name="overview"),
    path("<slug:slug>/members/", members.members, name="members"),
]
