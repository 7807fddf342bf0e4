"""Stream event ids: sealed per tenant, opened by any worker, never the bare log position."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_gateway.kernel.event_ids import SEALED_LENGTH, event_id_open, event_id_seal


@given(tenant_id=st.integers(1, 2**31), change_id=st.integers(0, 2**62))
def test_a_sealed_id_opens_to_its_position_for_its_tenant_only(tenant_id, change_id):
    sealed = event_id_seal(tenant_id=tenant_id, change_id=change_id)
    assert len(sealed) == SEALED_LENGTH
    assert event_id_open(tenant_id=tenant_id, value=sealed) == change_id
    assert event_id_open(tenant_id=tenant_id + 1, value=sealed) is None


def test_two_ids_of_one_position_differ_and_neither_is_a_number():
    first, second = (event_id_seal(tenant_id=7, change_id=41) for _ in range(2))
    assert first != second
    assert not first.isdigit()
    assert not second.isdigit()


def test_another_secret_key_opens_nothing(settings):
    sealed = event_id_seal(tenant_id=7, change_id=41)
    settings.SECRET_KEY = "another-secret-for-this-test"
    assert event_id_open(tenant_id=7, value=sealed) is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        "41",
        "9" * 22,
        "A" * 21,
        "A" * 23,
        "é" * 22,
        "\x00" * 22,
        "\u202e" + "A" * 21,
        "====" * 6,
        "+/" * 11,
    ],
)
def test_anything_this_server_never_sent_opens_to_nothing(value):
    assert event_id_open(tenant_id=7, value=value) is None
