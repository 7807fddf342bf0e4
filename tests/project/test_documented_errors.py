"""What the docs promise about errors and channels is what the code does: each code of the LLM
gateway's error table is the ``api_code`` of an error class answering with the documented status,
and the decision channels the research pages list are the ones the code records."""

from __future__ import annotations

import re
from pathlib import Path

import llm_gateway.api
import llm_gateway.api_calls
from core.errors import GatehouseError
from research import task_runner

# Where the API's own error classes live (imported for them: they subclass GatehouseError).
API_ERRORS = (llm_gateway.api.BodyTooLarge, llm_gateway.api_calls.MethodNotAllowed)

DOCS = Path(__file__).resolve().parents[2] / "docs"
ROW = re.compile(r"^\| (\d{3}) \| (.+?) \|", re.MULTILINE)


def _classes(base: type[GatehouseError]) -> list[type[GatehouseError]]:
    found = [base]
    for sub in base.__subclasses__():
        found.extend(_classes(sub))
    return found


def _statuses_by_code() -> dict[str, set[int]]:
    statuses: dict[str, set[int]] = {}
    for kind in _classes(GatehouseError):
        statuses.setdefault(kind.api_code, set()).add(kind.api_status or kind.http_status)
    return statuses


def test_the_llm_gateway_error_table_matches_the_error_classes():
    """Shown failing before: the table said an unreachable provider is 503 unavailable, and the
    code answered 502 provider_error (the code now says what the table does; this keeps them so)."""
    table = (DOCS / "llm-gateway.md").read_text().split("## Errors", 1)[1]
    statuses = _statuses_by_code()
    rows = ROW.findall(table)
    assert rows, "the error table was not found"
    for status, codes in rows:
        for code in re.findall(r"`([a-z_]+)`", codes):
            assert code in statuses, f"{code} is documented but no error class answers with it"
            assert int(status) in statuses[code], f"{code}: documented {status}, answered {statuses[code]}"


def test_the_documented_decision_channels_are_the_ones_recorded():
    text = (DOCS / "research-pages.md").read_text()
    documented = set(re.findall(r"`([a-z-]+)`", text.split("and the channel:", 1)[1].split(")", 1)[0]))
    recorded = {"web", task_runner.CHANNEL, "mcp", "stdio"}
    assert documented <= recorded, documented - recorded
    assert {"web", "mcp", "stdio"} <= documented
