from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.db import connections


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
