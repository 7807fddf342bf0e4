"""``upstreams.oauth`` in this process against the OAuth upstream test server: the providers of one
configuration's sessions share one token, and sessions needing one at the same moment (starting
together, or all finding it expired) wait for the one fetch instead of each fetching its own."""

from __future__ import annotations

import asyncio
import secrets

import httpx2
import pytest

from tests.support.upstream_support import UpstreamProcess
from tests.support.waiting import clock_past
from tests.upstreams.support import upstream_config
from upstreams.config import UpstreamConfig
from upstreams.oauth import upstream_oauth

CLIENT_ID = "gatehouse"
CLIENT_SECRET = "in-process-" + secrets.token_hex(8)
TOKEN_SECONDS = 2
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    process = UpstreamProcess(
        "http",
        workdir=tmp_path_factory.mktemp("upstream-oauth-tokens"),
        options=("--oauth", f"{CLIENT_ID}:{CLIENT_SECRET}", "--token-seconds", str(TOKEN_SECONDS)),
    ).start()
    yield process
    process.kill()


def _config(url: str) -> UpstreamConfig:
    """A configuration of its own (a new version) for each test: no state from another."""
    return upstream_config(
        url=url,
        auth="oauth",
        oauth_client_id=CLIENT_ID,
        version=secrets.token_hex(6),
        oauth_client_secret=CLIENT_SECRET,
    )


def _issued(process: UpstreamProcess) -> list[str]:
    return [r["token"] for r in process.records() if r.get("event") == "token_issued"]


async def _initialize_together(config: UpstreamConfig, sessions: int) -> list[httpx2.Response]:
    providers = [await upstream_oauth(config) for _ in range(sessions)]
    async with httpx2.AsyncClient(timeout=30) as http:
        return await asyncio.gather(
            *(http.post(config.url, json=INITIALIZE, headers=HEADERS, auth=p) for p in providers)
        )


async def test_sessions_starting_together_wait_for_one_token(vendor):
    config = _config(vendor.url)
    before = len(_issued(vendor))
    responses = await _initialize_together(config, 4)
    assert [r.status_code for r in responses] == [200] * 4, [r.text[:200] for r in responses]
    assert len(_issued(vendor)) - before == 1


async def test_sessions_finding_the_token_expired_together_wait_for_one_new_one(vendor):
    config = _config(vendor.url)
    await _initialize_together(config, 1)
    before = len(_issued(vendor))
    # The configuration's one token, shared by its sessions: past its lifetime as they count it.
    state = (await upstream_oauth(config))._state
    assert state.expires_at is not None
    await clock_past(state.expires_at)
    responses = await _initialize_together(config, 4)
    assert [r.status_code for r in responses] == [200] * 4, [r.text[:200] for r in responses]
    assert len(_issued(vendor)) - before == 1


async def test_without_resource_metadata_the_issuer_is_the_upstreams_origin(tmp_path):
    plain = UpstreamProcess("http", workdir=tmp_path).start()
    try:
        provider = await upstream_oauth(_config(plain.url))
    finally:
        plain.kill()
    assert provider._state.issuer == f"http://127.0.0.1:{plain.port}"
