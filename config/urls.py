from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from config.health import health, health_ready
from core.metrics import metrics_view
from llm_gateway.api import api_not_found, api_urlpatterns
from oauth import views as oauth_views
from oauth.authorize import ConsentView
from oauth.discovery import discovery_urlpatterns
from portal import views as portal_views
from portal.login import AdminLoginView, LoginView

# One list under DOT's namespace, so its metadata views can reverse every endpoint. Discovery
# documents live at the domain root (RFC 8414 / RFC 9728); the endpoints live under /oauth/.
oauth2_urlpatterns = [
    *discovery_urlpatterns,
    path("oauth/authorize/", ConsentView.as_view(), name="authorize"),
    path("oauth/token/", oauth_views.TokenView.as_view(), name="token"),
    path("oauth/revoke/", oauth_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", oauth_views.DynamicClientRegistrationView.as_view(), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        oauth_views.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

urlpatterns = [
    path("", portal_views.home, name="home"),
    path("", include((oauth2_urlpatterns, "oauth2_provider"))),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/sso/", include("portal.sign_in_urls")),
    path("accounts/", include("portal.urls")),
    path("console/", include("portal.console.urls")),
    path("conversations/", include("portal.conversation_urls")),
    path("research/", include("portal.research_urls")),
    # Ahead of the admin's own URLs, so the admin's sign-in is throttled and audited like any other.
    path("admin/login/", AdminLoginView.as_view()),
    path("admin/", include("portal.operator.urls")),  # the index with the operators' dashboard
    path("admin/", admin.site.urls),
    # The REST API (llm_gateway.api): its own protected resource, OpenAPI at /api/v1/openapi.json.
    path("api/v1/", include((api_urlpatterns(), "api-v1"))),
    # Any other path under /api answers the API's JSON 404, never the site's HTML one.
    re_path(r"^api(?:/.*)?$", api_not_found),
    path("docs", RedirectView.as_view(url="/api/v1/docs", permanent=False)),
    # Pages name their icon; what asks for /favicon.ico regardless (a JSON answer opened in a
    # browser, a bookmark) is sent to the same file rather than a 404.
    path("favicon.ico", RedirectView.as_view(url=static("gatehouse/favicon.svg"), permanent=True)),
    path("health", health, name="health"),
    path("health/ready", health_ready, name="health-ready"),
    path("metrics", metrics_view, name="metrics"),
]
