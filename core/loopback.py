"""Loopback: which hosts are this machine. One definition, used by every check that asks.

A host is a **loopback address** when it is an IP literal that never leaves the machine, whatever
DNS, ``/etc/hosts`` or a proxy say: IPv4 ``127.0.0.0/8`` (RFC 1122 §3.2.1.3, so ``127.0.0.2`` as
well as ``127.0.0.1``), IPv6 ``::1`` in any spelling (RFC 4291 §2.5.3), and the IPv4-mapped form of
the former (``::ffff:127.0.0.1``), which a dual-stack socket delivers to ``127.0.0.1``. These are
the "loopback IP literals" of RFC 8252 §7.3. The mapped form is checked here rather than left to
``ipaddress``, whose answer for it changed in Python 3.13.

The name ``localhost`` is a separate predicate, ``is_localhost_name``, and every caller that admits
it says so (``is_loopback_host(host, allow_localhost_name=True)``): it is looked up like any other
name, and RFC 8252 §8.3 advises against it for redirects because it may resolve elsewhere or listen
on the wrong interface. Only the bare name counts, in any letter case (DNS names are
case-insensitive); ``localhost.``, ``app.localhost`` and ``localhost.evil.example`` do not.

A host is given as ``urlsplit(...).hostname`` gives it (``::1``) or as it stands in an authority or
a Host header without its port (``[::1]``). Refused as not loopback: brackets around anything but
IPv6, an IPv6 zone (``::1%lo``: the literal alone already names this machine, and a zone only adds
a second spelling), IPv4 shorthands such as ``127.1`` that only some parsers read as an address, and
names that merely begin with a loopback literal (``127.0.0.1.evil.example``).

Plain Python, no Django: ``config.settings`` imports it before any app is loaded.
"""

from __future__ import annotations

import ipaddress

LOCALHOST = "localhost"


def is_loopback_address(host: str | None) -> bool:
    """Is ``host`` an IP literal of this machine (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104)?"""
    address = _ip_literal(host)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def is_localhost_name(host: str | None) -> bool:
    """Is ``host`` the name ``localhost`` (any letter case), and nothing longer?"""
    return host is not None and host.lower() == LOCALHOST


def is_loopback_host(host: str | None, *, allow_localhost_name: bool) -> bool:
    """A loopback address, or, where the caller admits it, the name ``localhost``."""
    return is_loopback_address(host) or (allow_localhost_name and is_localhost_name(host))


def _ip_literal(host: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not host:
        return None
    bracketed = host.startswith("[") and host.endswith("]")
    text = host[1:-1] if bracketed else host
    if "%" in text:
        return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # Brackets enclose an IPv6 literal in a URI (RFC 3986 §3.2.2) and nothing else.
    if bracketed and address.version != 6:
        return None
    return address
