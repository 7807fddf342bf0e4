"""An OpenAPI upstream made ready to store: its document (uploaded, fetched, or the one stored), its
base URL, and its tools generated from the operations selected. ``upstreams.services.upstream_save``
calls this before the configuration test, so the test and the collision checks see the tools the
row will publish.
"""

from __future__ import annotations

from typing import Any

from core.errors import InvalidInput
from upstreams.models import AuthKind, Upstream
from upstreams.openapi.document import FIELD, openapi_document_parse
from upstreams.openapi.fetch import openapi_document_fetch
from upstreams.openapi.security import openapi_base_url, openapi_token_url
from upstreams.openapi.tools import GeneratedTools, openapi_tools_generate
from upstreams.validation import url_validate

DOCUMENT_REQUIRED = "openapi_document: upload the API's OpenAPI document, or give its URL."
BASE_URL_NEEDED = "url: the document's servers give no absolute http(s) URL; enter the API's base URL."
NO_TOKEN_URL = (
    "auth: the document has no OAuth 2 security scheme with a client credentials flow (tokenUrl); "
    "choose another kind of authentication."
)


def _stored_openapi_url(upstream: Upstream) -> str | None:
    if upstream.pk is None:
        return None
    return Upstream.objects.filter(pk=upstream.pk).values_list("openapi_url", flat=True).first()


def openapi_selects(upstream: Upstream) -> Any:
    """Whether the upstream's tool selection lets a tool (by its own name) through."""
    include, exclude = set(upstream.include_tools or ()), set(upstream.exclude_tools or ())
    return lambda name: (not include or name in include) and name not in exclude


def openapi_generate(upstream: Upstream) -> GeneratedTools:
    """The tools of ``upstream``'s stored document, as its selection and prefix make them."""
    if not isinstance(upstream.openapi_document, dict):
        raise InvalidInput(DOCUMENT_REQUIRED, data={"field": FIELD})
    return openapi_tools_generate(
        document=upstream.openapi_document,
        selects=openapi_selects(upstream),
        prefix=f"{upstream.name}_" if upstream.prefix_tools else "",
    )


def openapi_upstream_prepare(*, upstream: Upstream, document: str | bytes | None, refetch: bool) -> None:
    """Load ``upstream``'s document (``document`` uploaded; else its ``openapi_url`` fetched when
    new, changed or ``refetch``; else the one stored), default its base URL to the document's
    server, and generate its tools (``openapi_tools``). ``InvalidInput`` naming the field for
    anything refused."""
    if document is not None:
        upstream.openapi_document = openapi_document_parse(content=document)
        upstream.openapi_url = ""
    elif upstream.openapi_url and (
        refetch or upstream.openapi_document is None or _stored_openapi_url(upstream) != upstream.openapi_url
    ):
        upstream.openapi_document = openapi_document_fetch(
            url=upstream.openapi_url, timeout=float(upstream.connect_timeout_seconds)
        )
    elif not isinstance(upstream.openapi_document, dict):
        raise InvalidInput(DOCUMENT_REQUIRED, data={"field": FIELD})
    assert isinstance(upstream.openapi_document, dict)
    if not upstream.url:
        base = openapi_base_url(document=upstream.openapi_document, document_url=upstream.openapi_url)
        if base is None:
            raise InvalidInput(BASE_URL_NEEDED, data={"field": "url"})
        upstream.url = url_validate(url=base)
    if upstream.auth == AuthKind.OAUTH and not openapi_token_url(
        document=upstream.openapi_document, base_url=upstream.url
    ):
        raise InvalidInput(NO_TOKEN_URL, data={"field": "auth"})
    upstream.openapi_tools = openapi_generate(upstream).tools
