from __future__ import annotations

from typing import Any

from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "oauth"
    label = "oauth"
    verbose_name = "OAuth grants and tokens"

    def ready(self) -> None:
        # DOT asks the application which schemes its redirect URIs may use: Application.clean()
        # (dynamic registration, metadata documents, the admin) and every authorization redirect
        # (OAuth2ResponseRedirect). Its answer is one global list, https and http; Gatehouse's is
        # per client, adding the private-use schemes (cursor://...) that client registered
        # (oauth.redirects). DOT's documented way to change the answer is a method on a swapped
        # Application model; Gatehouse uses DOT's own model, and Django does not support swapping
        # a model once its tables exist, so the method is set on DOT's class here, once.
        from oauth2_provider.models import Application

        from oauth.redirects import redirect_schemes_allowed

        def get_allowed_schemes(application: Any) -> list[str]:
            return redirect_schemes_allowed(application=application)

        Application.get_allowed_schemes = get_allowed_schemes
