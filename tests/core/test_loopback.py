"""One definition of loopback (core.loopback): the IP literals of this machine, and the name
``localhost`` only where a caller admits it."""

from __future__ import annotations

import pytest

from core.loopback import is_localhost_name, is_loopback_address, is_loopback_host


@pytest.mark.parametrize(
    "host",
    [
        pytest.param("127.0.0.1", id="ipv4"),
        pytest.param("127.0.0.2", id="ipv4-other-address-in-the-block"),
        pytest.param("127.255.255.254", id="ipv4-top-of-the-block"),
        pytest.param("::1", id="ipv6"),
        pytest.param("[::1]", id="ipv6-bracketed"),
        pytest.param("0:0:0:0:0:0:0:1", id="ipv6-long-form"),
        pytest.param("::ffff:127.0.0.1", id="ipv4-mapped"),
        pytest.param("[::ffff:127.0.0.1]", id="ipv4-mapped-bracketed"),
        pytest.param("::FFFF:7F00:2", id="ipv4-mapped-hex-upper-case"),
    ],
)
def test_the_loopback_ip_literals_are_loopback_addresses(host):
    assert is_loopback_address(host)
    assert is_loopback_host(host, allow_localhost_name=False)
    assert is_loopback_host(host, allow_localhost_name=True)


@pytest.mark.parametrize(
    "host",
    [
        pytest.param(None, id="none"),
        pytest.param("", id="empty"),
        pytest.param("[]", id="empty-brackets"),
        pytest.param("localhost", id="the-name-is-not-an-address"),
        pytest.param("126.255.255.255", id="just-below-the-block"),
        pytest.param("128.0.0.1", id="just-above-the-block"),
        pytest.param("0.0.0.0", id="unspecified-ipv4"),  # noqa: S104 (a value checked, not bound)
        pytest.param("::", id="unspecified-ipv6"),
        pytest.param("::2", id="ipv6-next-to-loopback"),
        pytest.param("::ffff:10.0.0.1", id="ipv4-mapped-private"),
        pytest.param("::127.0.0.1", id="ipv4-compatible-not-mapped"),
        pytest.param("[127.0.0.1]", id="brackets-around-ipv4"),
        pytest.param("[::1", id="unclosed-bracket"),
        pytest.param("::1%lo", id="ipv6-with-zone"),
        pytest.param("[::1%25lo]", id="bracketed-ipv6-with-zone"),
        pytest.param("127.1", id="ipv4-shorthand"),
        pytest.param("0x7f.0.0.1", id="ipv4-hex"),
        pytest.param("127.000.000.001", id="ipv4-leading-zeros"),
        pytest.param(" 127.0.0.1", id="leading-space"),
        pytest.param("127.0.0.1:8000", id="with-a-port"),
        pytest.param("127.0.0.1.evil.com", id="literal-as-a-subdomain"),
        pytest.param("evil.com", id="a-name"),
    ],
)
def test_anything_else_is_not_a_loopback_address(host):
    assert not is_loopback_address(host)
    assert not is_loopback_host(host, allow_localhost_name=False)


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "LocalHost"])
def test_localhost_in_any_case_counts_only_where_the_caller_admits_it(host):
    assert is_localhost_name(host)
    assert is_loopback_host(host, allow_localhost_name=True)
    assert not is_loopback_host(host, allow_localhost_name=False)


@pytest.mark.parametrize(
    "host",
    [
        pytest.param(None, id="none"),
        pytest.param("", id="empty"),
        pytest.param("localhost.", id="trailing-dot"),
        pytest.param("app.localhost", id="subdomain"),
        pytest.param("localhost.evil.com", id="as-a-subdomain-of-another-name"),
        pytest.param("localhost:8000", id="with-a-port"),
        pytest.param("[localhost]", id="bracketed"),
        pytest.param("localhostevil.com", id="as-a-prefix"),
    ],
)
def test_only_the_bare_name_is_localhost(host):
    assert not is_localhost_name(host)
    assert not is_loopback_host(host, allow_localhost_name=True)
