"""The literature sources answer from the recordings (tests/research/replay_server.py), never the
internet: ``replay`` installs the recorded transport; ``transport_answering`` installs any handler.
Without either, the tenant's own library is the one source offered."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from pytest_django.fixtures import Settings

from research.sources import http
from research.sources.registry import SOURCE_NAMES
from tests.research.replay_server import replay_transport, replay_urls

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture(autouse=True)
def _library_only(settings):
    """The tenant's own library is the one source: no test reaches the network."""
    settings.GATEHOUSE = {**settings.GATEHOUSE, "RESEARCH_SOURCES": ["library"]}


@pytest.fixture(autouse=True)
async def _close_db_call_connections():
    """The tools' ``db_call`` runs on asgiref's one worker thread, outside pytest-django's care:
    close its connection after each test so the test database can be dropped."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def replay(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The recordings answer; the requests the sources made."""
    seen: list[httpx.Request] = []
    recorded = replay_transport()

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return recorded.handle_request(request)

    _install(settings, monkeypatch, httpx.MockTransport(handle))
    return seen


@pytest.fixture
def transport_answering(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], None]:
    def install(handler: Handler) -> None:
        _install(settings, monkeypatch, httpx.MockTransport(handler))

    return install


def _install(settings: Settings, monkeypatch: pytest.MonkeyPatch, transport: httpx.MockTransport) -> None:
    settings.GATEHOUSE = {
        **settings.GATEHOUSE,
        **replay_urls(),
        "RESEARCH_SOURCES": list(SOURCE_NAMES),
        "RESEARCH_CONTACT_EMAIL": "librarian@example.org",
        "RESEARCH_HTTP_TIMEOUT_SECONDS": 5,
    }

    def client(*, timeout: float) -> httpx.Client:
        return httpx.Client(transport=transport, timeout=timeout)

    monkeypatch.setattr(http, "http_client", client)
