"""The literature search pages, at ``/research/`` (config/urls.py)."""

from __future__ import annotations

from django.urls import path

from portal import research_views

app_name = "research"

urlpatterns = [
    path("", research_views.research_list, name="list"),
    # Any text, not a <uuid:>: a malformed id is answered by the same "not found" page as an unknown one.
    path("<str:job_id>/", research_views.research_detail, name="detail"),
    path("<str:job_id>/decide/", research_views.research_decide, name="decide"),
    path("<str:job_id>/cancel/", research_views.research_cancel, name="cancel"),
    path("<str:job_id>/export/<str:fmt>/", research_views.research_export, name="export"),
]
