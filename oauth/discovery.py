"""Where clients look for discovery documents, and a clean answer everywhere else under
``/.well-known/``.

DOT's views build the documents (RFC 8414 authorization server metadata, RFC 9728 protected
resource metadata). They are served at the domain root and at the path-suffixed forms RFC 9728
names for our two protected resources: ``…/oauth-protected-resource/mcp`` (the root document is
the MCP one too, for clients that look there first) and ``…/oauth-protected-resource/api`` for the
REST API; and ``…/oauth-authorization-server/mcp``, which clients that take the MCP URL for the
issuer probe.
Gatehouse is not an OpenID provider, so ``/.well-known/openid-configuration`` in each of its forms,
and any other well-known path, answers a JSON 404: never the login page or an HTML error page.

Browser clients read all of these from any origin, the 404s too, preflights included: the CORS
policy (``core.cors``) treats everything under ``/.well-known/`` as public.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, re_path
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider import views as oauth2_views

from oauth.identity_assertion.grant import ID_JAG_PROFILE
from oauth.resource import API_SCOPES

API_RESOURCE_NAME = "Gatehouse API"
DISCOVERY_NOT_FOUND = "No discovery document here; see /.well-known/oauth-authorization-server."


# Exempt so that a probe with any method gets this answer rather than a CSRF refusal page.
@csrf_exempt
def discovery_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    return JsonResponse({"error": "not_found", "error_description": DISCOVERY_NOT_FOUND}, status=404)


class ApiResourceMetadataView(oauth2_views.OAuthProtectedResourceMetadataView):
    """RFC 9728 metadata for the REST API: DOT's document, with the API's identifier, name and
    scopes in place of the MCP endpoint's (which its settings describe)."""

    def get_resource(self, request: HttpRequest) -> str:
        return str(settings.API_RESOURCE_URL)

    def get_scopes_supported(self) -> list[str]:
        return sorted(API_SCOPES)

    def get_resource_name(self) -> str:
        return API_RESOURCE_NAME


class ServerMetadataView(oauth2_views.OAuthServerMetadataView):
    """RFC 8414 metadata: DOT's document, saying that identity assertions (ID-JAG) are taken."""

    def get(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        response: HttpResponse = super().get(request, *args, **kwargs)
        document = json.loads(response.content)
        document["authorization_grant_profiles_supported"] = [ID_JAG_PROFILE]
        # DOT's response, headers and all, with the one field more.
        response.content = json.dumps(document).encode()
        return response


_resource_path = settings.MCP_PATH.strip("/")
_api_path = settings.API_PATH.strip("/")

# Inside DOT's URL namespace (config.urls), in place of its metadata_urlpatterns, whose
# path-suffixed forms answer for any suffix at all.
discovery_urlpatterns: list[URLPattern] = [
    path(
        ".well-known/oauth-authorization-server",
        ServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path(
        f".well-known/oauth-authorization-server/{_resource_path}",
        ServerMetadataView.as_view(),
        name="oauth-server-metadata-issuer",
    ),
    path(
        ".well-known/oauth-protected-resource",
        oauth2_views.OAuthProtectedResourceMetadataView.as_view(),
        name="oauth-resource-metadata",
    ),
    path(
        f".well-known/oauth-protected-resource/{_resource_path}",
        oauth2_views.OAuthProtectedResourceMetadataView.as_view(),
        name="oauth-resource-metadata-path",
    ),
    path(
        f".well-known/oauth-protected-resource/{_api_path}",
        ApiResourceMetadataView.as_view(),
        name="oauth-resource-metadata-api",
    ),
    re_path(r"^\.well-known/", discovery_not_found, name="discovery-not-found"),
    # OpenID Connect Discovery's path-appended form, for an issuer with a path.
    re_path(r"^.+/\.well-known/", discovery_not_found),
]
