"""An OpenAPI document fetched from its URL when the upstream is saved: through the upstreams' own
HTTP client (``upstreams.egress``), so a document URL reaches no address an upstream's URL could
not; within a time limit; and read no further than the document size cap.

Saving is synchronous (a view, a command), so the fetch runs on an event loop of its own in a
thread of its own, as the configuration test does.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2

from core.errors import InvalidInput
from upstreams.egress import exception_egress_refusal, upstream_http_client
from upstreams.openapi.document import MAX_DOCUMENT_BYTES, openapi_document_parse

FIELD = "openapi_url"
ACCEPT = "application/vnd.oai.openapi+json, application/json, application/yaml, text/yaml, */*;q=0.5"
# Beyond the request's own timeout: the thread's loop may need a moment to close its connection.
CLEANUP_SECONDS = 5.0

FETCH_STATUS = "openapi_url: the document could not be fetched: the server answered HTTP {status}."
FETCH_TIMEOUT = "openapi_url: the document could not be fetched within {seconds:g} s."
FETCH_REFUSED = "openapi_url: {refusal}."
FETCH_FAILED = "openapi_url: the document could not be fetched ({kind})."
FETCH_TOO_BIG = f"openapi_url: the document is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MB."


def _refuse(message: str) -> InvalidInput:
    return InvalidInput(message, data={"field": FIELD})


async def _body(url: str, seconds: float) -> bytes:
    async with (
        upstream_http_client(timeout=httpx2.Timeout(seconds)) as client,
        client.stream("GET", url, headers={"Accept": ACCEPT}) as response,
    ):
        if response.status_code != 200:
            raise _refuse(FETCH_STATUS.format(status=response.status_code))
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_DOCUMENT_BYTES:
                raise _refuse(FETCH_TOO_BIG)
            chunks.append(chunk)
        return b"".join(chunks)


async def _fetched(url: str, seconds: float) -> bytes:
    try:
        async with asyncio.timeout(seconds):
            return await _body(url, seconds)
    except InvalidInput:
        raise
    except (TimeoutError, httpx2.TimeoutException):
        raise _refuse(FETCH_TIMEOUT.format(seconds=seconds)) from None
    except Exception as error:
        refusal = exception_egress_refusal(error)
        if refusal is not None:
            raise _refuse(FETCH_REFUSED.format(refusal=refusal)) from None
        # The kind of failure, not its text: an exception's message may carry the URL's query.
        raise _refuse(FETCH_FAILED.format(kind=type(error).__name__)) from None


def openapi_document_fetch(*, url: str, timeout: float = 10.0) -> dict[str, Any]:
    """The OpenAPI document at ``url`` (already validated as an upstream URL), fetched and
    validated; ``InvalidInput`` naming ``openapi_url`` when it cannot be fetched, or
    ``openapi_document`` when what came back is refused."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openapi-fetch")
    try:
        future = executor.submit(asyncio.run, _fetched(url, timeout))
        content = future.result(timeout=timeout + CLEANUP_SECONDS)
    except TimeoutError:
        raise _refuse(FETCH_TIMEOUT.format(seconds=timeout)) from None
    finally:
        executor.shutdown(wait=False)
    return openapi_document_parse(content=content)
