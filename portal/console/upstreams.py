"""The console's upstreams page, ``/console/<tenant>/upstreams/``: the tenant's upstream MCP servers
(name, transport, URL, enabled, when last tested and the tools that test found); its admins add one
(Streamable HTTP, SSE, or an OpenAPI description whose operations become tools, given by its URL or
uploaded), change it, test its connection and remove it; an upstream that signs in with OAuth shows
whether it is connected, and a Connect button (``upstream_connect``). stdio upstreams run a
command on Gatehouse's machine and stay the operators' (the admin, ``manage.py upstreams``): listed
here, never changed. Thin: each form is parsed (``upstream_forms``) and handed to the one service
the admin and the command line use (``upstreams.services``), which validates, tests, refuses tool
name collisions, audits and drops the cached configurations; what it refuses comes back as this
page with the form, its message beside the field, and the refusal's status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import URLPattern, path
from django.views.decorators.http import require_GET

from core.errors import GatehouseError, PermissionDenied
from oauth.parameter_guard import request_unsafe_parameter
from portal.console.access import ConsoleTenant
from portal.console.changes import console_change
from portal.console.pages import console_page, console_render
from portal.console.upstream_forms import UpstreamConsoleForm, upstream_initial
from upstreams.check import UpstreamTestResult, left_out_lines
from upstreams.forms import form_field_for
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.openapi.tools import openapi_operation_names
from upstreams.selectors import upstream_get, upstream_list
from upstreams.services import upstream_remove, upstream_save, upstream_test
from upstreams.sign_in.selectors import SignInStatus, upstream_sign_in_statuses

TEMPLATE = "console/upstreams.html"
SAVED = "{name} is saved: connected, {summary}."
SAVED_DISABLED = "{name} is saved, disabled: not connected, and not served to clients."
# An enabled OAuth sign-in upstream nobody has connected yet (``upstream_awaits_sign_in``).
SAVED_TO_CONNECT = "{name} is saved: connect it (Connect) to sign in; until then its tools are not served."
REMOVED = "{name} was removed: MCP clients no longer see its tools."
OPERATORS_ONLY = (
    "{name} runs a command on Gatehouse's machine (stdio): only operators change, test or remove it."
)


@dataclass(frozen=True)
class ConnectionTestAnswer:
    """What testing one upstream's connection found, shown on the answer to the test."""

    name: str
    result: UpstreamTestResult
    left_out: list[str]


@dataclass(frozen=True)
class ConsoleUpstream:
    """An upstream as the page lists it: never a credential, nor the URL's query (it may hold a key)."""

    name: str
    transport: str
    where: str
    enabled: bool
    last_tested: datetime | None
    tool_names: list[str]
    credentials: str
    operators_only: bool
    # OpenAPI: where the document was fetched from (its query hidden), or whether it was uploaded.
    openapi: bool
    document_url: str
    document_uploaded: bool
    # OAuth sign-in (None for other credentials): connected or not, by whom, an attempt under way.
    sign_in: SignInStatus | None


@require_GET
@console_page
def upstreams(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    """The page; ``?change=<name>`` fills the form in to change that upstream."""
    if (refused := _unsafe(request, console)) is not None:
        return refused
    if "change" in request.GET and console.can_change:
        chosen = _changeable(console, request.GET["change"])
        return _page(
            request, console, form=UpstreamConsoleForm(initial=upstream_initial(chosen)), chosen=chosen
        )
    return _page(request, console)


def _page(
    request: HttpRequest,
    console: ConsoleTenant,
    *,
    form: UpstreamConsoleForm | None = None,
    chosen: Upstream | None = None,
    tested: ConnectionTestAnswer | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "upstreams": _rows(console),
        "form": form or UpstreamConsoleForm(),
        "chosen": chosen,
        "operations": openapi_operation_names(document=chosen.openapi_document) if chosen is not None else [],
        "tested": tested,
        "error": error,
    }
    return console_render(request, console, TEMPLATE, context, status=status)


@console_change(page=_page)
def upstream_add(request: HttpRequest, console: ConsoleTenant) -> HttpResponse:
    return _save(request, console, name=None)


@console_change(page=_page)
def upstream_change(request: HttpRequest, console: ConsoleTenant, name: str) -> HttpResponse:
    return _save(request, console, name=name)


@console_change(page=_page)
def upstream_test_view(request: HttpRequest, console: ConsoleTenant, name: str) -> HttpResponse:
    """Connect to the stored upstream and say what its clients would see; writes nothing."""
    upstream = _changeable(console, name)
    result = upstream_test(upstream=upstream)
    answer = ConnectionTestAnswer(name=upstream.name, result=result, left_out=left_out_lines(result))
    return _page(request, console, tested=answer)


@console_change(page=_page)
def upstream_remove_view(request: HttpRequest, console: ConsoleTenant, name: str) -> HttpResponse:
    upstream = _changeable(console, name)
    upstream_remove(upstream=upstream, by=console.person)
    messages.success(request, REMOVED.format(name=upstream.name))
    return redirect("console:upstreams", slug=console.tenant.slug)


def _save(request: HttpRequest, console: ConsoleTenant, *, name: str | None) -> HttpResponse:
    chosen = _changeable(console, name) if name is not None else None
    form = UpstreamConsoleForm(request.POST, request.FILES)
    if not form.is_valid():
        return _page(request, console, form=form, chosen=chosen, status=422)
    # A row of its own: ``chosen`` keeps its stored name for the form shown again after a refusal.
    upstream = _changeable(console, name) if name is not None else Upstream(tenant=console.tenant)
    form.apply(upstream)
    header_value, oauth_client_secret = form.secrets()
    try:
        result = upstream_save(
            upstream=upstream,
            allow_stdio=False,
            header_value=header_value,
            oauth_client_secret=oauth_client_secret,
            by=console.person,
            **form.openapi(),
        )
    except GatehouseError as error:
        field = form_field_for((error.data or {}).get("field"))
        if field in form.fields:
            form.add_error(field, error.message)
            return _page(request, console, form=form, chosen=chosen, status=error.http_status)
        return _page(
            request, console, form=form, chosen=chosen, error=error.message, status=error.http_status
        )
    if result is None and upstream.enabled:
        messages.warning(request, SAVED_TO_CONNECT.format(name=upstream.name))
    elif result is None:
        messages.warning(request, SAVED_DISABLED.format(name=upstream.name))
    else:
        messages.success(request, SAVED.format(name=upstream.name, summary=result.summary))
        for line in left_out_lines(result):
            messages.warning(request, f"{upstream.name}: {line}")
    return redirect("console:upstreams", slug=console.tenant.slug)


def _changeable(console: ConsoleTenant, name: str) -> Upstream:
    """The tenant's upstream ``name`` (another tenant's is not found), if the console may change it."""
    upstream = upstream_get(tenant=console.tenant, name=name[:200])
    if upstream.transport == Transport.STDIO:
        raise PermissionDenied(OPERATORS_ONLY.format(name=upstream.name))
    return upstream


def _where(url: str) -> str:
    """The URL without its query and fragment, which may carry a key."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    hidden = "?…" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{parts.path}{hidden}"


def _credentials(upstream: Upstream) -> str:
    if upstream.auth in (AuthKind.HEADER, AuthKind.QUERY):
        stored = "stored" if upstream.header_value_encrypted else "no value stored"
        where = "header" if upstream.auth == AuthKind.HEADER else "query parameter"
        return f"{upstream.header_name} {where} ({stored})"
    if upstream.auth == AuthKind.OAUTH:
        stored = "secret stored" if upstream.oauth_client_secret_encrypted else "no secret stored"
        return f"OAuth client credentials ({stored})"
    if upstream.auth == AuthKind.OAUTH_CODE:
        return "OAuth sign-in"
    return "None"


def _rows(console: ConsoleTenant) -> list[ConsoleUpstream]:
    upstreams = list(upstream_list(tenant=console.tenant))
    statuses = upstream_sign_in_statuses(
        upstream_ids=[upstream.pk for upstream in upstreams if upstream.auth == AuthKind.OAUTH_CODE]
    )
    return [_row(upstream, sign_in=statuses.get(upstream.pk)) for upstream in upstreams]


def _row(upstream: Upstream, *, sign_in: SignInStatus | None) -> ConsoleUpstream:
    stdio = upstream.transport == Transport.STDIO
    return ConsoleUpstream(
        name=upstream.name,
        transport=upstream.get_transport_display(),
        where="" if stdio else _where(upstream.url),
        enabled=upstream.enabled,
        last_tested=upstream.last_tested,
        tool_names=[str(name) for name in upstream.tool_names or ()],
        credentials="Its environment (operators')" if stdio else _credentials(upstream),
        operators_only=stdio,
        openapi=upstream.transport == Transport.OPENAPI,
        document_url=_where(upstream.openapi_url) if upstream.openapi_url else "",
        document_uploaded=not upstream.openapi_url and upstream.openapi_document is not None,
        sign_in=sign_in,
    )


def _unsafe(request: HttpRequest, console: ConsoleTenant) -> HttpResponse | None:
    """The page with the reason, for a request carrying a NUL or invalid UTF-8 (nothing of it is used)."""
    problem = request_unsafe_parameter(request)
    if problem is None:
        return None
    return _page(request, console, error=problem, status=400)


urlpatterns: list[URLPattern] = [
    path("<slug:slug>/upstreams/", upstreams, name="upstreams"),
    path("<slug:slug>/upstreams/add/", upstream_add, name="upstream-add"),
    path("<slug:slug>/upstreams/<str:name>/change/", upstream_change, name="upstream-change"),
    path("<slug:slug>/upstreams/<str:name>/test/", upstream_test_view, name="upstream-test"),
    path("<slug:slug>/upstreams/<str:name>/remove/", upstream_remove_view, name="upstream-remove"),
]
