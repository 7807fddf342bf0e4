"""What an OpenAPI document says about where its API is and how to get a token for it: the base URL
(its first ``servers`` entry) and the token URL of its OAuth 2 client credentials flow. Plain
functions of the stored document, which ``upstreams.config`` reads without importing the rest of
this package.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin, urlsplit

_VARIABLE = re.compile(r"\{([^{}]*)\}")


def _absolute_http(url: str) -> str | None:
    parts = urlsplit(url)
    return url if parts.scheme in ("http", "https") and parts.hostname else None


def openapi_base_url(*, document: dict[str, Any], document_url: str) -> str | None:
    """The document's first ``servers`` URL, its variables at their defaults, resolved against
    the URL the document came from; None when that gives no absolute http(s) URL (an uploaded
    document whose server is ``/api``, or one with no servers at all)."""
    servers = document.get("servers")
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
        return None
    server = servers[0]
    url = server.get("url")
    if not isinstance(url, str) or not url:
        return None
    variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}

    def default(match: re.Match[str]) -> str:
        variable = variables.get(match.group(1)) if isinstance(variables, dict) else None
        value = variable.get("default") if isinstance(variable, dict) else None
        return str(value) if isinstance(value, str | int) else match.group(0)

    url = _VARIABLE.sub(default, url)
    if _VARIABLE.search(url):
        return None
    if document_url:
        url = urljoin(document_url, url)
    return _absolute_http(url)


def openapi_token_url(*, document: dict[str, Any] | None, base_url: str) -> str:
    """The ``tokenUrl`` of the first OAuth 2 security scheme with a client credentials flow,
    resolved against the API's base URL (as OpenAPI 3.1 resolves relative URLs); empty when the
    document has none."""
    if not isinstance(document, dict):
        return ""
    components = document.get("components")
    schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    if not isinstance(schemes, dict):
        return ""
    for scheme in schemes.values():
        if not isinstance(scheme, dict) or scheme.get("type") != "oauth2":
            continue
        flows = scheme.get("flows")
        flow = flows.get("clientCredentials") if isinstance(flows, dict) else None
        token_url = flow.get("tokenUrl") if isinstance(flow, dict) else None
        if isinstance(token_url, str) and token_url:
            resolved = urljoin(base_url, token_url) if base_url else token_url
            return _absolute_http(resolved) or ""
    return ""
