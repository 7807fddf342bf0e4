"""The demo tenants' literature search: the ``research`` toolset on, and a library holding a small
real bibliography (examples/research/demo_library.bib), so the whole flow works offline.

The library is imported through the same service as an operator's file, so a second run finds every
entry unchanged. The toolset is turned on only where the tenant has no setting for it yet: an
operator who turned it off keeps it off across ``make run``s.
"""

from __future__ import annotations

from pathlib import Path

from accounts.models import Tenant
from mcp_gateway.kernel.registry import default_registry
from mcp_gateway.kernel.toolset_access import toolset_set_enabled
from mcp_gateway.models import TenantToolset
from research.bibtex import ImportReport, library_import_bibtex

DEMO_LIBRARY_FILE = Path(__file__).resolve().parent.parent / "examples" / "research" / "demo_library.bib"
TOOLSET = "research"


def library_demo_ensure(*, tenant_id: int) -> ImportReport:
    return library_import_bibtex(tenant_id=tenant_id, text=DEMO_LIBRARY_FILE.read_text(encoding="utf-8"))


def research_demo_ensure(*, tenant: Tenant) -> ImportReport:
    """The demo library filled and, unless the tenant already has a setting for it, the toolset on."""
    report = library_demo_ensure(tenant_id=tenant.pk)
    if not TenantToolset.objects.filter(tenant=tenant, toolset=TOOLSET).exists():
        registry = default_registry()
        if registry.toolset(TOOLSET) is not None:
            toolset_set_enabled(tenant=tenant, toolset=TOOLSET, enabled=True, registry=registry)
    return report
