"""The configuration test of an OpenAPI upstream: its tools generated from the stored document, as
its selection and prefix make them, checked against the names the tenant's clients already see;
and, with OAuth client credentials, a token got from the token URL, so that a wrong secret is
refused when it is entered.

No request is made to the API itself: a REST API has no request that means "are you there" (its
root may be a 404, and any operation may have effects), so reaching it is left to the first call.
``upstreams.check.upstream_test`` hands OpenAPI upstreams here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from core.errors import InvalidInput
from mcp_gateway.kernel.federated_names import DUPLICATE, SHADOWED, name_ledger
from mcp_gateway.kernel.registry import default_registry
from upstreams.config import UpstreamConfig, config_from_row
from upstreams.egress import exception_egress_refusal
from upstreams.models import AuthKind, Upstream
from upstreams.openapi.auth import OpenApiOAuthError, openapi_access_token, openapi_token_forget
from upstreams.openapi.setup import openapi_generate

CLEANUP_SECONDS = 5.0
TOKEN_FAILED = "OAuth client credentials failed: {reason}"
TOKEN_TIMEOUT = "OAuth client credentials failed: no answer from the token URL within {seconds:g} s"


@dataclass(frozen=True)
class OpenApiCheck:
    ok: bool
    tool_names: list[str] = dataclasses.field(default_factory=list)
    left_out: tuple[tuple[str, str], ...] = ()
    error: str | None = None


def _names_listed_before(upstream: Upstream) -> list[str]:
    rows = Upstream.objects.filter(tenant_id=upstream.tenant_id, enabled=True, name__lt=upstream.name)
    if upstream.pk is not None:
        rows = rows.exclude(pk=upstream.pk)
    return [
        str(name)
        for names in rows.order_by("name").values_list("tool_names", flat=True)
        for name in names or ()
    ]


async def _token(config: UpstreamConfig) -> None:
    async with asyncio.timeout(config.connect_timeout):
        await openapi_access_token(config=config)


def _token_error(config: UpstreamConfig) -> str | None:
    """Why no token can be got with ``config``'s client credentials, or None."""
    config = dataclasses.replace(config, version=f"test-{uuid.uuid4().hex}")
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openapi-test")
    try:
        executor.submit(asyncio.run, _token(config)).result(timeout=config.connect_timeout + CLEANUP_SECONDS)
    except TimeoutError:
        return TOKEN_TIMEOUT.format(seconds=config.connect_timeout)
    except OpenApiOAuthError as error:
        return TOKEN_FAILED.format(reason=error)
    except Exception as error:
        refusal = exception_egress_refusal(error)
        return TOKEN_FAILED.format(reason=refusal if refusal is not None else type(error).__name__)
    finally:
        executor.shutdown(wait=False)
        openapi_token_forget(key=config.key)
    return None


def openapi_upstream_check(*, upstream: Upstream) -> OpenApiCheck:
    """What ``upstream`` (an OpenAPI upstream, saved or not) would publish, or why it cannot."""
    try:
        generated = openapi_generate(upstream)
        config = config_from_row(upstream)
    except (InvalidInput, ValueError) as error:
        return OpenApiCheck(ok=False, error=str(error))
    if config.auth == AuthKind.OAUTH:
        refused = _token_error(config)
        if refused is not None:
            return OpenApiCheck(ok=False, error=refused)
    ledger = name_ledger(registry=default_registry(), kind="tool")
    for name in _names_listed_before(upstream):
        ledger.take(name)
    names: list[str] = []
    left_out = [(config.published(name), why) for name, why in generated.left_out]
    for tool in generated.tools:
        name = config.published(tool["name"])
        why = ledger.left_out(name)
        if why is None:
            ledger.take(name)
            names.append(name)
        elif why in (SHADOWED, DUPLICATE):
            # A name taken as it is: saving refuses it, naming whose it is (upstreams.services).
            names.append(name)
        else:
            left_out.append((name, why))
    return OpenApiCheck(ok=True, tool_names=sorted(names), left_out=tuple(left_out))
