from __future__ import annotations

from django.urls import path

from portal.console import (
    clients,
    identity_provider,
    members,
    models,
    overview,
    tools,
    upstream_connect,
    upstreams,
    usage,
)

app_name = "console"

urlpatterns = [
    path("", overview.console_home, name="home"),
    path("<slug:slug>/", overview.overview, name="overview"),
    path("<slug:slug>/overview.json", overview.overview_data, name="overview-data"),
    path("<slug:slug>/members/", members.members, name="members"),
    path("<slug:slug>/tools/", tools.tools, name="tools"),
    path("<slug:slug>/tools/toggle/", tools.toolset_toggle, name="toolset-toggle"),
    path("<slug:slug>/models/", models.models, name="models"),
    path("<slug:slug>/models/save/", models.model_save, name="model-save"),
    path("<slug:slug>/models/remove/", models.model_remove, name="model-remove"),
    path("<slug:slug>/budgets/save/", models.budget_save, name="budget-save"),
    path("<slug:slug>/budgets/remove/", models.budget_remove, name="budget-remove"),
    path("<slug:slug>/usage/", usage.usage, name="usage"),
    path("<slug:slug>/usage.csv", usage.usage_csv, name="usage-csv"),
    *models.urlpatterns,
    *upstreams.urlpatterns,
    *upstream_connect.urlpatterns,
    *clients.urlpatterns,
    *identity_provider.urlpatterns,
    *members.urlpatterns,
]
