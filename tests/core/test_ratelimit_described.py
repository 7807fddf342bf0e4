"""A refusal names its limit as the refused client reads it ("10 registrations per hour per address")."""

from __future__ import annotations

import pytest
from limits import parse

from core.models import RateLimitScope
from core.ratelimit.limits import AppliedLimit
from core.throttles import _DESCRIBED_AS


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        ("10/hour", "10 registrations per hour per address"),
        ("5 per 15 minutes", "5 registrations per 15 minutes per address"),
        ("0/day", "0 registrations per day per address"),
    ],
)
def test_registration_refusals_name_the_limit_per_address(rate, expected):
    applied = AppliedLimit(parse(rate), counted_as="")

    assert applied.described(_DESCRIBED_AS[RateLimitScope.REGISTER]) == expected


def test_other_limits_keep_their_plain_text():
    applied = AppliedLimit(parse("2/minute"), counted_as="")

    assert applied.described(None) == applied.text == "2 per 1 minute"
