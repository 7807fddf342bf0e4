"""``GET /api/v1/usage`` against Daphne: the tenant's totals and series equal the sum of its usage
records, another tenant's never count, the scope is required, and bad parameters get the API's one
error shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from language_models.models import LlmUsage
from tests.e2e.llm_gateway_support import (
    INVOKE,
    api_client,
    api_token,
    assert_error,
    invoke_body,
    own_tenant_admin,
    script,
)

pytestmark = pytest.mark.django_db

USAGE = "/api/v1/usage"


@pytest.fixture
def own(committed):
    return own_tenant_admin(committed)


async def test_the_totals_are_the_sum_of_the_records(gateway_server, script_path, committed, own):
    script(script_path, "An answer.")
    token = api_token(
        committed, gateway_server, username=own.user.username, tenant=own.tenant.slug,
        scope="llm:invoke usage:read",
    )  # fmt: skip
    async with api_client(gateway_server, token) as http:
        for _ in range(3):
            assert (await http.post(INVOKE, json=invoke_body())).status_code == 200
        report = await http.get(USAGE)
        filtered = await http.get(USAGE, params={"feature": "ask_question"})
    assert report.status_code == 200, report.text
    body = report.json()
    records = [r async for r in LlmUsage.objects.filter(tenant=own.tenant)]
    assert body["tenant"] == own.tenant.slug
    assert body["total"]["calls"] == len(records) == 3
    assert body["total"]["total_tokens"] == sum(r.total_tokens for r in records) > 0
    assert body["total"]["cost"] == pytest.approx(float(sum(r.cost for r in records if r.cost)))
    today = datetime.now(UTC).date()
    assert body["to"] == today.isoformat()
    assert body["from"] == (today - timedelta(days=29)).isoformat()
    assert len(body["by_day"]) == 30
    assert body["by_day"][-1]["calls"] == 3
    assert [(row["feature"], row["calls"]) for row in body["by_feature"]] == [("api", 3)]
    assert [(row["model"], row["calls"]) for row in body["by_model"]] == [("gpt-4o-mini", 3)]
    assert filtered.json()["total"]["calls"] == 0


async def test_the_scope_is_required_and_bad_parameters_are_named(gateway_server, committed, own):
    caller = api_token(committed, gateway_server, username=own.user.username, tenant=own.tenant.slug)
    reader = api_token(
        committed, gateway_server, username=own.user.username, tenant=own.tenant.slug, scope="usage:read"
    )
    async with api_client(gateway_server, caller) as http:
        assert_error(await http.get(USAGE), status=403, code="insufficient_scope")
    async with api_client(gateway_server, reader) as http:
        cases = [
            ({"from": "2026-02-01", "to": "2026-01-01"}, "from"),
            ({"from": "2020-01-01", "to": "2026-01-01"}, "to"),
            ({"feature": "nope\u202e"}, "feature"),
            ({"feature": "ask_question\x00"}, "feature"),
            ({"model": "gpt\x00"}, "model"),
            ({"model": "x" * 5000}, "model"),
            ({"from": "yesterday"}, "from"),
        ]
        for params, field in cases:
            error = assert_error(await http.get(USAGE, params=params), status=400, code="validation_error")
            assert error["details"]["field"] == field, (params, error)
