"""Fixtures of the console upstreams page's tests: an outsider tenant, and a local REST API with its
OpenAPI document (one per module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.factories import TenantFactory
from tests.support.openapi_document_server import OpenAPIServer, openapi_server


@pytest.fixture
def outsider_tenant():
    return TenantFactory.create(slug="other-tenant", name="Other")


@pytest.fixture(scope="module")
def pets_api() -> Iterator[OpenAPIServer]:
    with openapi_server() as server:
        yield server
