from __future__ import annotations

import pytest

from mcp_gateway.pipeline.client_log import client_wants


@pytest.mark.parametrize(
    ("requested", "level", "sent"),
    [
        ("", "debug", True),
        ("debug", "info", True),
        ("info", "info", True),
        ("warning", "info", False),
        ("error", "critical", True),
        ("emergency", "alert", False),
    ],
)
def test_a_message_is_sent_when_it_is_at_least_as_severe_as_asked(requested, level, sent):
    assert client_wants(requested=requested, level=level) is sent
