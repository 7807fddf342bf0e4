"""The operators' admin under Gatehouse's own name, with the OAuth models in one group.

DOT's application model lives in its own app (``oauth2_provider``) while Gatehouse's grants, tokens,
consents and redirect patterns live in ``oauth``; an operator looking for "OAuth" should find one
section, not two. DOT's ID tokens are not shown at all: Gatehouse is not an OpenID provider.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest

OAUTH_APP = "oauth"
MERGED_INTO_OAUTH = frozenset({"oauth2_provider"})


class GatehouseAdminSite(admin.AdminSite):
    site_header = "Gatehouse administration"
    site_title = "Gatehouse admin"
    index_title = "Tenants, people, clients and the audit trail"

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = super().get_app_list(request, app_label)
        merged = [model for app in apps if app["app_label"] in MERGED_INTO_OAUTH for model in app["models"]]
        kept = [app for app in apps if app["app_label"] not in MERGED_INTO_OAUTH]
        oauth = next((app for app in kept if app["app_label"] == OAUTH_APP), None)
        if oauth is None:
            return apps
        oauth["models"] = sorted([*merged, *oauth["models"]], key=lambda model: str(model["name"]))
        return kept


class GatehouseAdminConfig(AdminConfig):
    default_site = "config.admin_site.GatehouseAdminSite"
