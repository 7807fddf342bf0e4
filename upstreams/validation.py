"""What an upstream's configuration must be before Gatehouse stores it: checked here, field by field,
so the admin, the command line and any later API refuse the same things with the same words.

Each refusal is an ``InvalidInput`` whose message names the field and whose data carries it
(``{"field": ...}``), so a form can put it under the right box. Secrets are checked for their shape
only; no message ever repeats a value.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from accounts.scopes import scope_definitions
from core.errors import InvalidInput
from core.text_safety import text_unstorable_reason
from upstreams.egress import EgressRefused, egress_check
from upstreams.models import AuthKind, Transport, Upstream

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
# RFC 9110's token: the characters a header name may have.
HEADER_NAME_PATTERN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,200}")
ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
# Headers the transport itself sets (or Gatehouse sends for the caller's identity): a configured
# credential header must not replace them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
        "x-gatehouse-user",
        "x-gatehouse-tenant",
    }
)

MAX_URL = 2000
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_COMMAND = 1000
MAX_ARGS = 100
MAX_ARG = 2000
MAX_ENV = 100
MAX_ENV_VALUE = 10_000
MAX_CWD = 1000
MAX_TOOL_LIST = 500
MAX_TOOL_NAME = 200
MAX_SCOPES = 20
MAX_SECRET = 8000
MAX_OAUTH_CLIENT_ID = 500
MAX_OAUTH_SCOPE = 1000
CONNECT_TIMEOUT_RANGE = (0.1, 120.0)
CALL_TIMEOUT_RANGE = (0.1, 3600.0)

STDIO_OPERATORS_ONLY = "Only operators may configure stdio upstreams (a command run on Gatehouse's machine)."
NAME_INVALID = "name: use 1 to 40 lowercase letters, digits and hyphens, starting with a letter or digit."
NAME_TAKEN = "name: the tenant already has an upstream named {name!r}."
TENANT_MISSING = "tenant: an upstream belongs to a tenant."
PASS_IDENTITY_MCP_ONLY = "pass_identity: only http and sse upstreams get the caller's identity headers."
BASE_URL_QUERY = (
    "url: an OpenAPI upstream's base URL has no query or fragment (an API key in the query is an "
    "authentication kind of its own)."
)
QUERY_OPENAPI_ONLY = "auth: an API key in the query is for OpenAPI upstreams."
QUERY_NAME_INVALID = "header_name: the query parameter's name (letters, digits, '-', '_', '.') is needed."
QUERY_VALUE_NEEDED = "header_value: the API key is needed."
OAUTH_CODE_MCP_ONLY = "auth: OAuth sign-in is for http and sse upstreams."
OAUTH_REMOTE_ONLY = "auth: OAuth client credentials are for http, sse and OpenAPI upstreams."
# Where a caller's sign-in and identity headers mean something: MCP over HTTP.
MCP_OVER_HTTP = frozenset({Transport.HTTP, Transport.SSE})
QUERY_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,200}")


def _refuse(field: str, message: str) -> InvalidInput:
    return InvalidInput(message, data={"field": field})


def _text(field: str, value: Any, *, max_length: int, required: bool = False, controls: bool = False) -> str:
    """``value`` as a storable string of at most ``max_length`` characters; control characters
    refused unless ``controls``."""
    if not isinstance(value, str):
        raise _refuse(field, f"{field}: must be text.")
    reason = text_unstorable_reason(value)
    if reason is not None:
        raise _refuse(field, f"{field}: {reason}.")
    if not controls and CONTROL_CHARACTERS.search(value):
        raise _refuse(field, f"{field}: must not contain control characters (line breaks, tabs...).")
    if len(value) > max_length:
        raise _refuse(field, f"{field}: at most {max_length} characters.")
    if required and not value.strip():
        raise _refuse(field, f"{field}: required.")
    return value


def _strings(field: str, value: Any, *, max_items: int, max_length: int) -> list[str]:
    if not isinstance(value, list):
        raise _refuse(field, f"{field}: must be a list of strings.")
    if len(value) > max_items:
        raise _refuse(field, f"{field}: at most {max_items} entries.")
    for item in value:
        _text(field, item, max_length=max_length, required=True)
    return value


def _timeout(field: str, value: Any, bounds: tuple[float, float]) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _refuse(field, f"{field}: must be a number of seconds.")
    low, high = bounds
    if not low <= value <= high:
        raise _refuse(field, f"{field}: between {low:g} and {high:g} seconds.")


def url_validate(*, url: Any, field: str = "url") -> str:
    """An http(s) URL with a host, without credentials (they belong in the header or OAuth
    settings, stored encrypted, not in a URL shown in lists and logs), whose host is not, and does
    not resolve to, a private address this deployment keeps upstreams from."""
    _text(field, url, max_length=MAX_URL, required=True)
    if any(c.isspace() for c in url):
        raise _refuse(field, f"{field}: must not contain spaces.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise _refuse(field, f"{field}: not a valid URL ({error}).") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _refuse(field, f"{field}: an http:// or https:// URL with a host is needed.")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _refuse(
            field,
            f"{field}: must not carry credentials; use a static header or OAuth client credentials.",
        )
    if port == 0:
        raise _refuse(field, f"{field}: port 0 is not a port.")
    # Early, for a clear answer at the field: each connection is checked again (upstreams.egress),
    # since what a name resolves to may change after it is saved.
    try:
        egress_check(host=parts.hostname, port=port or DEFAULT_PORTS[parts.scheme])
    except EgressRefused as refusal:
        raise _refuse(field, f"{field}: {refusal}.") from None
    return url


def env_validate(*, env: Any) -> dict[str, str]:
    if not isinstance(env, Mapping):
        raise _refuse("env", "env: must be NAME=VALUE pairs.")
    if len(env) > MAX_ENV:
        raise _refuse("env", f"env: at most {MAX_ENV} variables.")
    for name, value in env.items():
        if not isinstance(name, str) or text_unstorable_reason(name) or not ENV_NAME_PATTERN.fullmatch(name):
            raise _refuse(
                "env", "env: a variable name is letters, digits and underscores, not starting with a digit."
            )
        # The value is a secret: its problem is said, never the value.
        if not isinstance(value, str):
            raise _refuse("env", f"env: the value of {name} must be text.")
        reason = text_unstorable_reason(value)
        if reason is not None:
            raise _refuse("env", f"env: the value of {name} {reason}.")
        if len(value) > MAX_ENV_VALUE:
            raise _refuse("env", f"env: the value of {name} is longer than {MAX_ENV_VALUE} characters.")
    return dict(env)


def _secret(field: str, value: str) -> None:
    if not isinstance(value, str):
        raise _refuse(field, f"{field}: must be text.")
    reason = text_unstorable_reason(value)
    if reason is not None:
        raise _refuse(field, f"{field}: {reason}.")
    # A line break in a header value would start another header.
    if CONTROL_CHARACTERS.search(value):
        raise _refuse(field, f"{field}: must not contain control characters (line breaks, tabs...).")
    if len(value) > MAX_SECRET:
        raise _refuse(field, f"{field}: at most {MAX_SECRET} characters.")


def upstream_validate(
    *,
    upstream: Upstream,
    allow_stdio: bool,
    header_value: str | None,
    oauth_client_secret: str | None,
    env: Mapping[str, str] | None,
) -> None:
    """Refuse (``InvalidInput`` naming the field) whatever in ``upstream`` and the secrets given
    with it Gatehouse cannot store or use. The name's uniqueness is checked against the database."""
    if upstream.tenant_id is None:
        raise _refuse("tenant", TENANT_MISSING)
    name = _text("name", upstream.name, max_length=40)
    if not NAME_PATTERN.fullmatch(name):
        raise _refuse("name", NAME_INVALID)
    taken = Upstream.objects.filter(tenant_id=upstream.tenant_id, name=name).exclude(pk=upstream.pk)
    if taken.exists():
        raise _refuse("name", NAME_TAKEN.format(name=name))
    if upstream.transport not in Transport.values:
        raise _refuse("transport", f"transport: one of {', '.join(Transport.values)}.")
    if upstream.auth not in AuthKind.values:
        raise _refuse("auth", f"auth: one of {', '.join(AuthKind.values)}.")
    remote = upstream.transport != Transport.STDIO
    # Every text field is checked whatever the transport: a value kept from an earlier transport
    # is stored too.
    _text("url", upstream.url, max_length=MAX_URL)
    _text("openapi_url", upstream.openapi_url, max_length=MAX_URL)
    _text("command", upstream.command, max_length=MAX_COMMAND)
    _args_validate(args=upstream.args)
    _text("cwd", upstream.cwd, max_length=MAX_CWD)
    if upstream.transport == Transport.OPENAPI:
        # The base URL may be left for the document's servers to give (upstreams.openapi.setup
        # checks it once known); the document's URL is reached like an upstream's.
        if upstream.url:
            url_validate(url=upstream.url)
            parts = urlsplit(upstream.url)
            if parts.query or parts.fragment:
                # Each operation's path is appended to it.
                raise _refuse("url", BASE_URL_QUERY)
        if upstream.openapi_url:
            url_validate(url=upstream.openapi_url, field="openapi_url")
    elif remote:
        url_validate(url=upstream.url)
    else:
        _stdio_validate(upstream=upstream, allow_stdio=allow_stdio)
    if env is not None:
        env_validate(env=env)
    _timeout("connect_timeout_seconds", upstream.connect_timeout_seconds, CONNECT_TIMEOUT_RANGE)
    _timeout("call_timeout_seconds", upstream.call_timeout_seconds, CALL_TIMEOUT_RANGE)
    for field in ("include_tools", "exclude_tools"):
        _strings(field, getattr(upstream, field), max_items=MAX_TOOL_LIST, max_length=MAX_TOOL_NAME)
    scopes = _strings("scopes", upstream.scopes, max_items=MAX_SCOPES, max_length=200)
    if not scopes:
        raise _refuse("scopes", "scopes: at least one scope (mcp:read lets every member use it).")
    unknown = sorted(set(scopes) - set(scope_definitions()))
    if unknown:
        raise _refuse(
            "scopes",
            f"scopes: unknown {', '.join(unknown)}; known: {', '.join(sorted(scope_definitions()))}.",
        )
    if upstream.pass_identity and upstream.transport not in MCP_OVER_HTTP:
        raise _refuse("pass_identity", PASS_IDENTITY_MCP_ONLY)
    _auth_validate(
        upstream=upstream, remote=remote, header_value=header_value, oauth_client_secret=oauth_client_secret
    )


def _args_validate(*, args: Any) -> None:
    if not isinstance(args, list):
        raise _refuse("args", "args: must be a list of strings.")
    if len(args) > MAX_ARGS:
        raise _refuse("args", f"args: at most {MAX_ARGS} entries.")
    for arg in args:
        # An argument may be empty or span lines (a script for ``-c``); it cannot hold a NUL.
        _text("args", arg, max_length=MAX_ARG, controls=True)


def _stdio_validate(*, upstream: Upstream, allow_stdio: bool) -> None:
    if not allow_stdio:
        raise _refuse("transport", STDIO_OPERATORS_ONLY)
    _text("command", upstream.command, max_length=MAX_COMMAND, required=True)
    if upstream.cwd and not (os.path.isabs(upstream.cwd) and os.path.isdir(upstream.cwd)):
        raise _refuse("cwd", "cwd: an existing directory (an absolute path) is needed.")


def _auth_validate(
    *, upstream: Upstream, remote: bool, header_value: str | None, oauth_client_secret: str | None
) -> None:
    _text("header_name", upstream.header_name, max_length=200)
    _text("oauth_client_id", upstream.oauth_client_id, max_length=MAX_OAUTH_CLIENT_ID)
    _text("oauth_scope", upstream.oauth_scope, max_length=MAX_OAUTH_SCOPE)
    if header_value is not None:
        _secret("header_value", header_value)
    if oauth_client_secret is not None:
        _secret("oauth_client_secret", oauth_client_secret)
    if upstream.auth == AuthKind.HEADER:
        if not HEADER_NAME_PATTERN.fullmatch(upstream.header_name):
            raise _refuse("header_name", "header_name: a header name (letters, digits, - and _) is needed.")
        if upstream.header_name.lower() in RESERVED_HEADERS:
            raise _refuse("header_name", f"header_name: {upstream.header_name} is set by Gatehouse itself.")
        if not remote:
            raise _refuse("auth", "auth: a stdio upstream gets its credentials through its environment.")
        if not (header_value or (header_value is None and upstream.header_value_encrypted)):
            raise _refuse("header_value", "header_value: the header's value is needed.")
    if upstream.auth == AuthKind.QUERY:
        if upstream.transport != Transport.OPENAPI:
            raise _refuse("auth", QUERY_OPENAPI_ONLY)
        if not QUERY_NAME_PATTERN.fullmatch(upstream.header_name):
            raise _refuse("header_name", QUERY_NAME_INVALID)
        if not (header_value or (header_value is None and upstream.header_value_encrypted)):
            raise _refuse("header_value", QUERY_VALUE_NEEDED)
    if upstream.auth == AuthKind.OAUTH_CODE and upstream.transport not in MCP_OVER_HTTP:
        # A tenant admin signs in once; the client id (a pre-registered client), its secret and
        # the scope are all optional, so nothing more is required here.
        raise _refuse("auth", OAUTH_CODE_MCP_ONLY)
    if upstream.auth == AuthKind.OAUTH:
        if not remote:
            raise _refuse("auth", OAUTH_REMOTE_ONLY)
        if not upstream.oauth_client_id.strip():
            raise _refuse("oauth_client_id", "oauth_client_id: the OAuth client id is needed.")
        if not (
            oauth_client_secret or (oauth_client_secret is None and upstream.oauth_client_secret_encrypted)
        ):
            raise _refuse("oauth_client_secret", "oauth_client_secret: the OAuth client secret is needed.")
