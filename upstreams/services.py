"""Configuring a tenant's upstreams: the one path by which the admin and the command line save or
remove one.

Saving an enabled upstream connects to it first (``upstreams.check``): a configuration that cannot
connect is refused when it is entered, with the reason, rather than found at a caller's first call.
Its tool names, as published, are then checked against every other tool the tenant's clients see
(Gatehouse's own and its other enabled upstreams'); a collision is refused here, with the prefix
that would avoid it, and never settled silently at call time.

Every save and removal is audited (``upstream.changed``) in the same transaction: who (``by``; none
from the command line), which upstream, and the names of the fields that changed. A credential is
named as replaced or removed, never given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import Tenant, User
from core.audit.trail import audit_record
from core.crypto import secret_encrypt
from core.errors import InvalidInput
from core.models import AuditAction
from mcp_gateway.kernel.registry import default_registry
from upstreams.check import UpstreamTestResult, upstream_test
from upstreams.models import AuthKind, Transport, Upstream
from upstreams.openapi.setup import openapi_upstream_prepare
from upstreams.selectors import upstream_configs_forget
from upstreams.sign_in.provider import upstream_interactive_installed
from upstreams.sign_in.selectors import upstream_sign_in_connected
from upstreams.validation import NAME_TAKEN, upstream_validate

__all__ = ["UpstreamTestResult", "upstream_remove", "upstream_save", "upstream_test"]

GATEHOUSE = "Gatehouse"
TEST_FAILED = (
    "Connection test failed: {error}. Fix it, or save the upstream disabled to keep it without connecting."
)
NAMES_TAKEN = "Tool names already taken: {taken}."
SUGGEST_PREFIX = "Turn on prefix tools to publish them as {prefixed}."
SUGGEST_EXCLUDE = "Exclude these tools, or rename the upstream."

# The fields an audit row compares, besides the write-only ones (named by what happened to them).
AUDITED_FIELDS = (
    "name",
    "transport",
    "protocol",
    "url",
    "command",
    "args",
    "cwd",
    "connect_timeout_seconds",
    "call_timeout_seconds",
    "include_tools",
    "exclude_tools",
    "prefix_tools",
    "scopes",
    "enabled",
    "auth",
    "header_name",
    "oauth_client_id",
    "oauth_scope",
    "pass_identity",
    "openapi_url",
    "openapi_document",
)
SECRET_FIELDS = {
    "env": "env_encrypted",
    "header_value": "header_value_encrypted",
    "oauth_client_secret": "oauth_client_secret_encrypted",
}


def upstream_save(
    *,
    upstream: Upstream,
    allow_stdio: bool,
    header_value: str | None = None,
    oauth_client_secret: str | None = None,
    env: Mapping[str, str] | None = None,
    openapi_document: str | bytes | None = None,
    openapi_refetch: bool = False,
    by: User | None = None,
) -> UpstreamTestResult | None:
    """Validate and save ``upstream`` (new or changed). The secrets given replace the stored ones
    (``None`` keeps them; an empty value clears them) and are stored encrypted only. An enabled
    upstream is tested and checked for tool name collisions first; the test's result is returned
    (``None`` for a disabled upstream, which is saved without connecting). Raises
    ``InvalidInput`` (its data naming the field when there is one) for anything refused. ``by``
    is who is saving it, for the audit row.

    An OpenAPI upstream's document is ``openapi_document`` when one is uploaded (JSON or YAML);
    otherwise its ``openapi_url`` is fetched when it is new or changed (or ``openapi_refetch``),
    else the stored document is kept. Its tools are generated from it at every save
    (``upstreams.openapi.setup``)."""
    upstream_validate(
        upstream=upstream,
        allow_stdio=allow_stdio,
        header_value=header_value,
        oauth_client_secret=oauth_client_secret,
        env=env,
    )
    if upstream.transport == Transport.OPENAPI:
        openapi_upstream_prepare(upstream=upstream, document=openapi_document, refetch=openapi_refetch)
    if header_value is not None:
        upstream.header_value_encrypted = secret_encrypt(plaintext=header_value) if header_value else ""
    if oauth_client_secret is not None:
        upstream.oauth_client_secret_encrypted = (
            secret_encrypt(plaintext=oauth_client_secret) if oauth_client_secret else ""
        )
    if env is not None:
        upstream.env_encrypted = (
            secret_encrypt(plaintext=json.dumps(dict(env), sort_keys=True)) if env else ""
        )
    result = None
    if upstream.enabled and not upstream_awaits_sign_in(upstream=upstream):
        result = upstream_test(upstream=upstream)
        if not result.ok:
            raise InvalidInput(TEST_FAILED.format(error=result.error))
        upstream.tool_names = result.tool_names
        upstream.last_tested = timezone.now()
    with transaction.atomic():
        # One save per tenant at a time: two upstreams saved at once cannot both take a name.
        Tenant.objects.select_for_update().filter(pk=upstream.tenant_id).exists()
        before = _stored(upstream)
        if upstream.enabled:
            _refuse_collisions(upstream=upstream)
        try:
            with transaction.atomic():
                upstream.save()
        except IntegrityError:
            raise InvalidInput(NAME_TAKEN.format(name=upstream.name), data={"field": "name"}) from None
        _audit(
            upstream=upstream,
            upstream_id=upstream.pk,
            by=by,
            change="added" if before is None else "changed",
            fields=_changed(before=before, upstream=upstream),
        )
    upstream_configs_forget(tenant_id=upstream.tenant_id)
    return result


def upstream_awaits_sign_in(*, upstream: Upstream) -> bool:
    """An OAuth sign-in upstream no tenant admin has connected yet: it cannot be tested (there is
    no token to test it with), so it is saved untested, and a member's call says it needs
    connecting until an admin signs in to it (``upstreams.sign_in``)."""
    if upstream.auth != AuthKind.OAUTH_CODE:
        return False
    if upstream.pk is None:
        return True
    return not (
        upstream_sign_in_connected(upstream_id=upstream.pk)
        or upstream_interactive_installed(upstream_id=upstream.pk)
    )


def upstream_remove(*, upstream: Upstream, by: User | None = None) -> None:
    """Remove ``upstream``; ``by`` is who removed it, for the audit row."""
    tenant_id = upstream.tenant_id
    with transaction.atomic():
        removed_id = upstream.pk
        upstream.delete()
        _audit(upstream=upstream, upstream_id=removed_id, by=by, change="removed", fields=[])
    upstream_configs_forget(tenant_id=tenant_id)


def _stored(upstream: Upstream) -> dict[str, object] | None:
    """The row as stored before this save (None for a new upstream)."""
    if upstream.pk is None:
        return None
    return Upstream.objects.filter(pk=upstream.pk).values(*AUDITED_FIELDS, *SECRET_FIELDS.values()).first()


def _changed(*, before: dict[str, object] | None, upstream: Upstream) -> list[str]:
    """The names of the fields whose value this save changes (for a new upstream: those set).
    A write-only field is compared by its ciphertext, which a new value always changes."""
    names = []
    for name in AUDITED_FIELDS:
        value = getattr(upstream, name)
        if (before is None and value not in ("", [], None, False)) or (
            before is not None and before.get(name) != value
        ):
            names.append(name)
    for name, column in SECRET_FIELDS.items():
        value = getattr(upstream, column)
        if (before is None and value) or (before is not None and before.get(column) != value):
            names.append(name)
    return names


def _audit(
    *, upstream: Upstream, upstream_id: int | None, by: User | None, change: str, fields: list[str]
) -> None:
    detail: dict[str, object] = {
        "change": change,
        "upstream_id": upstream_id,
        "transport": upstream.transport,
        "enabled": upstream.enabled,
    }
    if change != "removed":
        detail["fields"] = fields
        for name, column in SECRET_FIELDS.items():
            if name in fields:
                detail[name] = "replaced" if getattr(upstream, column) else "removed"
    audit_record(
        action=AuditAction.UPSTREAM_CHANGED,
        user=by,
        tenant=upstream.tenant,
        target=upstream.name,
        detail=detail,
    )


def _refuse_collisions(*, upstream: Upstream) -> None:
    taken = _names_taken(upstream=upstream)
    colliding = [name for name in upstream.tool_names if name in taken]
    if not colliding:
        return
    message = NAMES_TAKEN.format(taken=", ".join(f"{name} ({taken[name]})" for name in colliding))
    prefixed = [f"{upstream.name}_{name}" for name in colliding]
    if not upstream.prefix_tools and not any(name in taken for name in prefixed):
        message += " " + SUGGEST_PREFIX.format(prefixed=", ".join(prefixed))
    else:
        message += " " + SUGGEST_EXCLUDE
    raise InvalidInput(message, data={"field": "prefix_tools", "colliding": colliding})


def _names_taken(*, upstream: Upstream) -> dict[str, str]:
    """Every tool name the tenant's clients may see besides ``upstream``'s, with whose it is."""
    taken = {spec.name: GATEHOUSE for spec in default_registry().tools}
    others = (
        Upstream.objects.filter(tenant_id=upstream.tenant_id, enabled=True)
        .exclude(pk=upstream.pk)
        .order_by("name")
        .values_list("name", "tool_names")
    )
    for other, names in others:
        for name in names or ():
            taken.setdefault(str(name), f"upstream {other!r}")
    return taken
