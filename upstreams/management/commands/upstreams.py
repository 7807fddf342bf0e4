"""Operators' way to add, list, test and remove a tenant's upstream MCP servers
(``upstreams.services``). A credential (a header's value, an OAuth client secret) is read from
stdin with ``--secret-stdin``, never from the command line, where other users of the machine and
the shell's history would see it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.selectors import tenant_get
from core.errors import GatehouseError
from upstreams.check import UpstreamTestResult, left_out_lines
from upstreams.models import AuthKind, Transport, Upstream, UpstreamProtocol, default_scopes
from upstreams.openapi.document import MAX_DOCUMENT_BYTES
from upstreams.selectors import upstream_get, upstream_list
from upstreams.services import upstream_remove, upstream_save, upstream_test

SECRET_NEEDS_STDIN = "{what} is read from stdin: add --secret-stdin and pipe it in."
SECRET_EMPTY = "--secret-stdin: nothing was read from stdin."
SECRET_UNUSED = "--secret-stdin: only with --header, --query-key or --oauth-client-id."
HEADER_AND_OAUTH = "Use one of --header, --query-key, --oauth-client-id and --oauth-sign-in."
TRANSPORT_WITH_OPENAPI = "--transport: an OpenAPI upstream is reached over plain HTTP requests."
OPENAPI_ONLY = "{option}: only with --openapi-url or --openapi-file (an OpenAPI upstream)."
FILE_UNREADABLE = "--openapi-file: {path} cannot be read ({reason})."
# Read whole, then refused by the loader's own size check: a bound on what is read at all.
FILE_READ_LIMIT = MAX_DOCUMENT_BYTES + 1
ENV_FORM = "--env: NAME=VALUE expected."
STDIO_ONLY = "{option}: only with --command (a stdio upstream)."
TRANSPORT_WITH_COMMAND = "--transport: a --command upstream is always stdio."
LIST_COLUMNS = ("TENANT", "NAME", "TRANSPORT", "TARGET", "ENABLED", "TOOLS", "LAST TESTED")
TARGET_WIDTH = 60


def tested(result: UpstreamTestResult) -> str:
    """``3 tools: a, b, c`` and the other kinds' counts."""
    line = f"{result.summary.partition(', ')[0]}: {', '.join(result.tool_names) or '(none)'}"
    others = result.summary.partition(", ")[2]
    line = f"{line} (and {others})" if others else line
    return "\n".join([line, *left_out_lines(result)])


class Command(BaseCommand):
    help = (
        "Manage a tenant's upstream MCP servers: add, list, test, remove. A header value or OAuth "
        "client secret is read from stdin with --secret-stdin."
    )
    # call_command(..., stdin=StringIO(...)) in tests; the process's stdin otherwise.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="Add an upstream to a tenant (tested unless --disabled).")
        add.add_argument("tenant", help="The tenant's slug.")
        add.add_argument("name", help="A slug, unique in the tenant.")
        target = add.add_mutually_exclusive_group(required=True)
        target.add_argument("--url", help="An http or sse upstream's URL.")
        target.add_argument("--command", dest="stdio_command", help="A stdio upstream's command.")
        target.add_argument("--openapi-url", help="An OpenAPI upstream: its document's URL.")
        target.add_argument(
            "--openapi-file", type=Path, help="An OpenAPI upstream: its document (JSON or YAML file)."
        )
        add.add_argument("--transport", choices=[Transport.HTTP.value, Transport.SSE.value])
        add.add_argument(
            "--protocol",
            choices=[p.value for p in UpstreamProtocol],
            default=UpstreamProtocol.AUTO.value,
            help="auto: 2026-07-28 when the server speaks it; handshake: always initialize.",
        )
        add.add_argument(
            "--base-url", default="", help="An OpenAPI upstream's base URL (default: the document's server)."
        )
        add.add_argument(
            "--query-key",
            default="",
            metavar="NAME",
            help="OpenAPI: an API key in this query parameter (stdin).",
        )
        add.add_argument(
            "--oauth-sign-in",
            action="store_true",
            help="OAuth authorization code: a tenant admin connects it in the console after it is added.",
        )
        add.add_argument(
            "--arg", action="append", default=[], help="An argument (repeat; --arg=-x for one with a dash)."
        )
        add.add_argument(
            "--env", action="append", default=[], help="NAME=VALUE for the command's environment."
        )
        add.add_argument("--cwd", default="", help="The command's working directory.")
        add.add_argument("--prefix", action="store_true", help="Publish tools as <name>_<tool>.")
        add.add_argument("--include", action="append", default=[], help="Only this tool (repeat).")
        add.add_argument("--exclude", action="append", default=[], help="Never this tool (repeat).")
        add.add_argument(
            "--scope", action="append", default=[], help="A scope callers need (default mcp:read)."
        )
        add.add_argument("--header", default="", help="Send this header; its value is read from stdin.")
        add.add_argument(
            "--oauth-client-id", default="", help="OAuth client credentials; the secret from stdin."
        )
        add.add_argument("--oauth-scope", default="")
        add.add_argument(
            "--secret-stdin", action="store_true", help="Read the header value or client secret from stdin."
        )
        add.add_argument(
            "--pass-identity", action="store_true", help="Send X-Gatehouse-User and X-Gatehouse-Tenant."
        )
        add.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS")
        add.add_argument("--call-timeout", type=float, default=60.0, metavar="SECONDS")
        add.add_argument(
            "--disabled", action="store_true", help="Save without connecting; callers do not see it."
        )
        listing = actions.add_parser("list", help="List upstreams (of one tenant, if given).")
        listing.add_argument("tenant", nargs="?")
        test = actions.add_parser("test", help="Connect to an upstream and list its tools.")
        test.add_argument("tenant")
        test.add_argument("name")
        remove = actions.add_parser("remove", help="Remove an upstream.")
        remove.add_argument("tenant")
        remove.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"handle_{options['action']}")(**options)
        except GatehouseError as exc:
            raise CommandError(exc.message) from exc

    def handle_add(self, *, tenant: str, name: str, **options: Any) -> None:
        upstream = Upstream(tenant=tenant_get(slug=tenant), name=name, **_fields(options))
        header_value, client_secret = None, None
        if options["secret_stdin"]:
            secret = _read_secret(options.get("stdin") or sys.stdin)
            if upstream.auth in (AuthKind.HEADER, AuthKind.QUERY):
                header_value = secret
            elif upstream.auth == AuthKind.OAUTH:
                client_secret = secret
            else:
                raise CommandError(SECRET_UNUSED)
        elif upstream.auth == AuthKind.HEADER:
            raise CommandError(SECRET_NEEDS_STDIN.format(what="The header's value"))
        elif upstream.auth == AuthKind.QUERY:
            raise CommandError(SECRET_NEEDS_STDIN.format(what="The API key"))
        elif upstream.auth == AuthKind.OAUTH:
            raise CommandError(SECRET_NEEDS_STDIN.format(what="The OAuth client secret"))
        result = upstream_save(
            upstream=upstream,
            allow_stdio=True,
            header_value=header_value,
            oauth_client_secret=client_secret,
            env=_env(options["env"]) if options["env"] else None,
            openapi_document=_document(options["openapi_file"]),
        )
        where = f"upstream {upstream.name!r} to {upstream.tenant.slug}"
        if result is None and upstream.enabled:
            self.stdout.write(
                f"Added {where}: a tenant admin connects it in the console (Connect) to sign in."
            )
        elif result is None:
            self.stdout.write(f"Added {where}, disabled (not tested).")
        else:
            self.stdout.write(f"Added {where}. Connected: {tested(result)}")

    def handle_list(self, *, tenant: str | None, **options: Any) -> None:
        rows = [LIST_COLUMNS]
        for upstream in upstream_list(tenant=tenant_get(slug=tenant) if tenant else None):
            rows.append(
                (
                    upstream.tenant.slug,
                    upstream.name,
                    upstream.transport,
                    _target(upstream),
                    "yes" if upstream.enabled else "no",
                    str(len(upstream.tool_names or ())),
                    upstream.last_tested.strftime("%Y-%m-%d %H:%M") if upstream.last_tested else "never",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(LIST_COLUMNS))]
        for row in rows:
            self.stdout.write(
                "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            )

    def handle_test(self, *, tenant: str, name: str, **options: Any) -> None:
        result = upstream_test(upstream=upstream_get(tenant=tenant_get(slug=tenant), name=name))
        if not result.ok:
            raise CommandError(f"{name}: {result.error}")
        self.stdout.write(tested(result))

    def handle_remove(self, *, tenant: str, name: str, **options: Any) -> None:
        upstream = upstream_get(tenant=tenant_get(slug=tenant), name=name)
        upstream_remove(upstream=upstream)
        self.stdout.write(f"Removed upstream {name!r} from {tenant}.")


def _fields(options: dict[str, Any]) -> dict[str, Any]:
    """The model's fields from the ``add`` options."""
    stdio = options["stdio_command"] is not None
    if not stdio:
        for option, value in (
            ("--arg", options["arg"]),
            ("--env", options["env"]),
            ("--cwd", options["cwd"]),
        ):
            if value:
                raise CommandError(STDIO_ONLY.format(option=option))
    elif options["transport"]:
        raise CommandError(TRANSPORT_WITH_COMMAND)
    openapi = options["openapi_url"] is not None or options["openapi_file"] is not None
    if openapi and options["transport"]:
        raise CommandError(TRANSPORT_WITH_OPENAPI)
    if not openapi:
        for option, value in (("--base-url", options["base_url"]), ("--query-key", options["query_key"])):
            if value:
                raise CommandError(OPENAPI_ONLY.format(option=option))
    credentials = [
        options["header"],
        options["query_key"],
        options["oauth_client_id"],
        options["oauth_sign_in"],
    ]
    if sum(1 for given in credentials if given) > 1:
        raise CommandError(HEADER_AND_OAUTH)
    auth = (
        AuthKind.HEADER
        if options["header"]
        else AuthKind.QUERY
        if options["query_key"]
        else AuthKind.OAUTH
        if options["oauth_client_id"]
        else AuthKind.OAUTH_CODE
        if options["oauth_sign_in"]
        else AuthKind.NONE
    )
    transport = (
        Transport.STDIO if stdio else Transport.OPENAPI if openapi else options["transport"] or Transport.HTTP
    )
    return {
        "transport": transport,
        "protocol": options["protocol"],
        "url": (options["base_url"] if openapi else options["url"]) or "",
        "openapi_url": options["openapi_url"] or "",
        "command": options["stdio_command"] or "",
        "args": options["arg"],
        "cwd": options["cwd"],
        "prefix_tools": options["prefix"],
        "include_tools": options["include"],
        "exclude_tools": options["exclude"],
        "scopes": options["scope"] or default_scopes(),
        "auth": auth,
        "header_name": options["header"] or options["query_key"],
        "oauth_client_id": options["oauth_client_id"],
        "oauth_scope": options["oauth_scope"],
        "pass_identity": options["pass_identity"],
        "connect_timeout_seconds": options["connect_timeout"],
        "call_timeout_seconds": options["call_timeout"],
        "enabled": not options["disabled"],
    }


def _env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CommandError(ENV_FORM)
        env[name] = value
    return env


def _document(path: Path | None) -> bytes | None:
    """The file's bytes (bounded), for the loader to parse and refuse."""
    if path is None:
        return None
    try:
        with path.open("rb") as document:
            return document.read(FILE_READ_LIMIT)
    except OSError as error:
        raise CommandError(
            FILE_UNREADABLE.format(path=path, reason=error.strerror or type(error).__name__)
        ) from None


def _read_secret(stdin: TextIO) -> str:
    # One line (a trailing newline from echo or a file is not part of the secret).
    secret = stdin.readline().rstrip("\r\n")
    if not secret:
        raise CommandError(SECRET_EMPTY)
    return secret


def _target(upstream: Upstream) -> str:
    """Where the upstream is, without what may be a secret: a URL's query, a command's arguments."""
    if upstream.transport == Transport.STDIO:
        target = shlex.quote(upstream.command) + (f" (+{len(upstream.args)} args)" if upstream.args else "")
    else:
        parts = urlsplit(upstream.url)
        target = f"{parts.scheme}://{parts.netloc}{parts.path}" + ("?…" if parts.query else "")
    return target if len(target) <= TARGET_WIDTH else target[: TARGET_WIDTH - 1] + "…"
