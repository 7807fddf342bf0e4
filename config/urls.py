from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider import views as oauth2_views
from oauth2_provider.urls import metadata_urlpatterns

from accounts.views import ConsentView
from config.health import health
from mcp_gateway.metrics import metrics_view

# One list under DOT's namespace, so its metadata views can reverse every endpoint. Discovery
# documents live at the domain root (RFC 8414 / RFC 9728); the endpoints live under /oauth/.
oauth2_urlpatterns = [
    *metadata_urlpatterns,
    path("oauth/authorize/", ConsentView.as_view(), name="authorize"),
    path("oauth/token/", oauth2_views.TokenView.as_view(), name="token"),
    path("oauth/revoke/", oauth2_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", oauth2_views.DynamicClientRegistrationView.as_view(), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        oauth2_views.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

urlpatterns = [
    path("", include((oauth2_urlpatterns, "oauth2_provider"))),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("health", health, name="health"),
    path("metrics", metrics_view, name="metrics"),
]
