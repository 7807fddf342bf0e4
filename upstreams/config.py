"""What a connection to an upstream needs, read once from its row: an immutable snapshot with the
secrets decrypted, which the session pool and the catalog key their state on. An edited upstream
gets a new ``key`` (its ``updated`` time), so sessions and lists of the old configuration are
never used for the new one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.crypto import secret_decrypt
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.openapi.security import openapi_token_url

ConfigKey = tuple[int, str]


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    id: int
    tenant_id: int
    tenant_slug: str
    name: str
    transport: str
    protocol: str
    url: str
    command: str
    args: tuple[str, ...]
    cwd: str
    connect_timeout: float
    call_timeout: float
    include: frozenset[str]
    exclude: frozenset[str]
    prefix: bool
    scopes: frozenset[str]
    auth: str
    header_name: str
    oauth_client_id: str
    oauth_scope: str
    pass_identity: bool
    version: str
    # The tool names (as published) its last test found: a call can still name the upstream when
    # its lists cannot be fetched, and gets the upstream's error rather than "unknown tool".
    known_tools: frozenset[str] = frozenset()
    # OpenAPI upstreams: the tools generated when it was saved, each with what its call needs
    # (upstreams.openapi.tools), and the token URL its OAuth client credentials go to.
    openapi_tools: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)
    openapi_token_url: str = ""
    # Secrets: never in a repr, hence never in a log line or a traceback's locals.
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    header_value: str = field(default="", repr=False)
    oauth_client_secret: str = field(default="", repr=False)

    @property
    def key(self) -> ConfigKey:
        return (self.id, self.version)

    @property
    def label(self) -> str:
        """The upstream as metrics and logs name it: tenant and name."""
        return f"{self.tenant_slug}/{self.name}"

    def published(self, name: str) -> str:
        """The name a tool or prompt of this upstream has for Gatehouse's clients."""
        return f"{self.name}_{name}" if self.prefix else name

    def published_tools(self, tools: Iterable[str]) -> list[str]:
        """The names, sorted, under which the tool selection lets ``tools`` (the upstream's own
        names) through to Gatehouse's clients."""
        return sorted({self.published(tool) for tool in tools if self.selects(tool)})

    def selects(self, tool: str) -> bool:
        """Whether the tool selection lets the upstream's tool ``tool`` through."""
        return (not self.include or tool in self.include) and tool not in self.exclude

    @property
    def remote(self) -> bool:
        return self.transport != Transport.STDIO


def config_from_row(row: Upstream) -> UpstreamConfig:
    """The snapshot of ``row`` (its tenant loaded), secrets decrypted; ``ValueError`` when a stored
    secret no longer decrypts with the current key."""
    return UpstreamConfig(
        id=row.pk,
        tenant_id=row.tenant_id,
        tenant_slug=row.tenant.slug,
        name=row.name,
        transport=row.transport,
        protocol=row.protocol,
        url=row.url,
        command=row.command,
        args=tuple(str(a) for a in row.args or ()),
        cwd=row.cwd,
        connect_timeout=float(row.connect_timeout_seconds),
        call_timeout=float(row.call_timeout_seconds),
        include=frozenset(row.include_tools or ()),
        exclude=frozenset(row.exclude_tools or ()),
        prefix=row.prefix_tools,
        scopes=frozenset(row.scopes or ()),
        auth=row.auth,
        header_name=row.header_name,
        oauth_client_id=row.oauth_client_id,
        oauth_scope=row.oauth_scope,
        pass_identity=row.pass_identity,
        version=row.updated.isoformat() if row.updated else "",
        known_tools=frozenset(str(n) for n in row.tool_names or ()),
        openapi_tools=_openapi_tools(row),
        openapi_token_url=(
            openapi_token_url(document=row.openapi_document, base_url=row.url)
            if row.transport == Transport.OPENAPI and row.auth == AuthKind.OAUTH
            else ""
        ),
        env=_env(row.env_encrypted),
        header_value=secret_decrypt(token=row.header_value_encrypted) if row.header_value_encrypted else "",
        oauth_client_secret=(
            secret_decrypt(token=row.oauth_client_secret_encrypted)
            if row.oauth_client_secret_encrypted
            else ""
        ),
    )


def _openapi_tools(row: Upstream) -> tuple[dict[str, Any], ...]:
    if row.transport != Transport.OPENAPI or not isinstance(row.openapi_tools, list):
        return ()
    return tuple(tool for tool in row.openapi_tools if isinstance(tool, dict))


def _env(encrypted: str) -> dict[str, str]:
    import json

    if not encrypted:
        return {}
    loaded = json.loads(secret_decrypt(token=encrypted))
    return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
