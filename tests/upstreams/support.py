"""What the upstream configuration tests share: rows not yet saved, pointing at the test server."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accounts.models import Tenant
from tests.support.upstream_support import stdio_command
from upstreams.config import UpstreamConfig
from upstreams.models import Transport, Upstream

CONFIG = UpstreamConfig(
    id=1,
    tenant_id=1,
    tenant_slug="acme",
    name="vendor",
    transport="http",
    protocol="auto",
    url="http://127.0.0.1:9/mcp",
    command="",
    args=(),
    cwd="",
    connect_timeout=10,
    call_timeout=10,
    include=frozenset(),
    exclude=frozenset(),
    prefix=False,
    scopes=frozenset(),
    auth="none",
    header_name="",
    oauth_client_id="",
    oauth_scope="",
    pass_identity=False,
    version="v1",
)


def stdio_fields(*extra_args: str) -> dict[str, Any]:
    """The test server over stdio (``extra_args`` such as ``--extra-tool whoami``)."""
    command, args = stdio_command()
    return {"transport": Transport.STDIO, "command": command, "args": [*args, *extra_args]}


def unsaved(tenant: Tenant, name: str = "docs", **fields: Any) -> Upstream:
    """A new upstream as a form or the command would build it, before ``upstream_save``."""
    return Upstream(tenant=tenant, name=name, **{"url": "http://127.0.0.1:9/mcp", **fields})


def upstream_config(**overrides: Any) -> UpstreamConfig:
    """An upstream's configuration snapshot with no row behind it, with ``overrides``."""
    return replace(CONFIG, **overrides)
