"""A person's connections, shaped for the connected-applications page so that each row can be told
apart from the others and still reads at a glance.

A client that registers itself on every run leaves one application per run, all under one name:
six "Newcomer SDK client" rows, each listing the same eight permissions in full, told a person
nothing. So each row says what the server knows that differs between them (when and how the client
registered, where it sends the person back to after consent, when it was last used) and lists its
permissions once, by name, with what each allows a click away rather than repeated in every row.
The loopback port a client registered and the seconds of its registration are shown only where they
tell rows of the same name apart; elsewhere they are noise (a loopback redirect may use any port).

A client's name and redirect URIs are its own words (dynamic registration, a metadata document), so
they are read as text from outside: without the invisible characters that reorder or hide text
(``core.text_safety.text_cleaned``); the template escapes, isolates (``<bdi>``) and cuts them.
Nothing here reads the database: it shapes what ``portal.connected`` loaded.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from oauth2_provider.models import Application

from accounts.scopes import scope_definitions
from core.loopback import is_loopback_host
from core.text_safety import text_cleaned
from core.uri_schemes import uri_scheme
from oauth.redirects import is_private_use_redirect
from portal.connected import Connection

# A client may register many redirect URIs (OAUTH_CLIENT_MAX_REDIRECT_URIS); a row names a few.
HOSTS_SHOWN = 3
REGISTERED_BY = {
    Application.RegistrationSource.DCR: "by itself (dynamic registration)",
    Application.RegistrationSource.CIMD: "from its client ID metadata document",
    Application.RegistrationSource.MANUAL: "by an operator",
}


@dataclass(frozen=True, slots=True)
class ScopeShown:
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a client sends the person back to after consent (its redirect URIs).

    ``on_this_computer``: a loopback address, or a private-use scheme the browser hands to an app
    on this computer (``schemes``); ``ports``: the loopback ports it registered; ``hosts``: every
    other host, each once, in the order registered."""

    on_this_computer: bool
    ports: tuple[int, ...]
    schemes: tuple[str, ...]
    hosts: tuple[str, ...]


@dataclass(slots=True)
class ConnectionShown:
    connection: Connection
    name: str
    registered_by: str
    # For a client whose client ID is its metadata document's URL: that document's host.
    document_host: str
    destination: Destination
    scopes: list[ScopeShown]
    show_ports: bool = False
    show_seconds: bool = False

    @property
    def registered(self) -> datetime:
        return self.connection.application.created

    @property
    def hosts_shown(self) -> tuple[str, ...]:
        return self.destination.hosts[:HOSTS_SHOWN]

    @property
    def hosts_left_out(self) -> int:
        return max(0, len(self.destination.hosts) - HOSTS_SHOWN)


def connections_shown(*, connections: list[Connection]) -> list[ConnectionShown]:
    """Each connection as its row shows it, in the order given."""
    descriptions = {name: definition.description for name, definition in scope_definitions().items()}
    rows = [_shown(connection, descriptions=descriptions) for connection in connections]
    namesakes: dict[str, list[ConnectionShown]] = defaultdict(list)
    for row in rows:
        namesakes[row.name.casefold()].append(row)
    for group in namesakes.values():
        _tell_apart(group)
    return rows


def _shown(connection: Connection, *, descriptions: dict[str, str]) -> ConnectionShown:
    application = connection.application
    cimd = application.registration_source == Application.RegistrationSource.CIMD
    return ConnectionShown(
        connection=connection,
        name=_one_line(application.name) or _one_line(application.client_id),
        registered_by=REGISTERED_BY.get(application.registration_source, application.registration_source),
        document_host=_host(application.client_id) if cimd else "",
        destination=destination_of(redirect_uris=application.redirect_uris.split()),
        # A scope no longer in the table still shows, by name: the person should see it all.
        scopes=[
            ScopeShown(name=name, description=descriptions.get(name, ""))
            for name in sorted(connection.scopes)
        ],
    )


def _tell_apart(group: list[ConnectionShown]) -> None:
    # Compared per application: one client connected in two tenants is one registration, told
    # apart by its tenant.
    applications = {row.connection.application.pk: row for row in group}
    if len(applications) < 2:
        return
    ports = {row.destination.ports for row in applications.values()}
    minutes = {row.registered.replace(second=0, microsecond=0) for row in applications.values()}
    for row in group:
        row.show_ports = len(ports) > 1
        row.show_seconds = len(minutes) < len(applications)


def _one_line(text: str) -> str:
    return " ".join(text_cleaned(text).split())


def destination_of(*, redirect_uris: list[str]) -> Destination:
    """Where these redirect URIs send a person back to."""
    on_this_computer = False
    ports: list[int] = []
    schemes: list[str] = []
    hosts: list[str] = []
    for uri in redirect_uris:
        if is_private_use_redirect(uri):
            on_this_computer = True
            schemes.append(uri_scheme(uri) or "")
            continue
        try:
            parts = urlsplit(uri)
            port = parts.port
        except ValueError:
            # Registration refuses a malformed URI; one written by hand in the admin is left out.
            continue
        if parts.scheme == "http" and is_loopback_host(parts.hostname, allow_localhost_name=True):
            on_this_computer = True
            if port is not None:
                ports.append(port)
            continue
        hosts.append(_host(uri))
    # Each once, in the order registered (dict keys keep it).
    return Destination(
        on_this_computer=on_this_computer,
        ports=tuple(sorted(set(ports))),
        schemes=tuple(dict.fromkeys(scheme for scheme in schemes if scheme)),
        hosts=tuple(dict.fromkeys(host for host in hosts if host)),
    )


def _host(uri: str) -> str:
    """The host a person would recognise, with its port unless it is the scheme's own; never the
    userinfo, so "trusted.example@evil.example" reads as evil.example."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return ""
    host = _one_line(parts.hostname or "")
    if ":" in host:
        host = f"[{host}]"
    default = {"https": 443, "http": 80}.get(parts.scheme)
    return f"{host}:{port}" if host and port is not None and port != default else host
