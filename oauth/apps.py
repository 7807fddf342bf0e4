from __future__ import annotations

from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "oauth"
    label = "oauth"
    verbose_name = "OAuth grants and tokens"
