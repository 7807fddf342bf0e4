"""Globex's demo upstream, so federation can be tried right after ``make run``: the small stdio MCP
server in ``examples/upstream_demo`` (dice, unit conversions, word counts), registered as ``demo``
with prefixed names (``demo_roll_dice``...).

Safe on every start. The row is created when missing, and its command and path follow the checkout
(a moved checkout, another virtualenv); when they change, or the row has no tool names yet, the
server is started once and its tools listed, as a configuration test would. Anything an operator
changed in the row (disabled it, a tool selection, its scopes) is left as it is.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from accounts.models import Tenant
from upstreams.check import upstream_test
from upstreams.models import Transport, Upstream
from upstreams.selectors import upstream_configs_forget

logger = logging.getLogger(__name__)

DEMO_UPSTREAM_NAME = "demo"
DEMO_SERVER = Path(settings.BASE_DIR) / "examples" / "upstream_demo" / "server.py"
DEMO_NOT_STARTED = (
    f"Upstream for globex: {DEMO_UPSTREAM_NAME!r} could not be started; see the warning above "
    "(docs/upstreams.md)."
)


def upstream_demo_register(*, tenant: Tenant) -> Upstream:
    """``tenant``'s ``demo`` upstream, created or pointed at this checkout's demo server; its
    ``tool_names`` are the published names the server lists (left as they were, and logged, if it
    cannot be started: bootstrap_demo and make run then say so, and the rest of the demo stands)."""
    command, args = sys.executable, [str(DEMO_SERVER.resolve())]
    row, created = Upstream.objects.get_or_create(
        tenant=tenant,
        name=DEMO_UPSTREAM_NAME,
        defaults={"transport": Transport.STDIO, "command": command, "args": args, "prefix_tools": True},
    )
    moved = row.command != command or row.args != args
    if moved:
        row.command, row.args = command, args
        row.save(update_fields=["command", "args", "updated"])
    if created or moved or not row.tool_names:
        _tool_names_refresh(row=row)
        upstream_configs_forget(tenant_id=tenant.pk)
    return row


def upstream_demo_line(*, upstream: Upstream) -> str:
    """What the demo upstream is, in one line, as bootstrap_demo and make run say it."""
    if not upstream.tool_names:
        return DEMO_NOT_STARTED
    return (
        f"Upstream for globex: {upstream.name!r}, the stdio server examples/upstream_demo/server.py "
        f"({', '.join(upstream.tool_names)}; docs/upstreams.md)."
    )


def _tool_names_refresh(*, row: Upstream) -> None:
    # The configuration test, as a save would run it (the row may have been disabled by an operator).
    result = upstream_test(upstream=Upstream.objects.select_related("tenant").get(pk=row.pk))
    if not result.ok:
        logger.warning(
            "The demo upstream %s/%s could not be started: %s", row.tenant.slug, row.name, result.error
        )
        return
    row.tool_names = result.tool_names
    row.last_tested = timezone.now()
    row.save(update_fields=["tool_names", "last_tested", "updated"])
