"""Daphne hands POST bodies to the application without Twisted's form parsing (config.daphne_http)."""

from __future__ import annotations

from types import SimpleNamespace

from daphne import http_protocol
from twisted.internet.address import IPv4Address

import config.asgi  # noqa: F401  (importing the application switches the parsing off)
from config.daphne_http import daphne_form_parsing_off


def _channel() -> SimpleNamespace:
    address = IPv4Address("TCP", "127.0.0.1", 8000)
    server = SimpleNamespace(protocol_connected=lambda request: None)
    return SimpleNamespace(
        factory=SimpleNamespace(server=server),
        getPeer=lambda: address,
        getHost=lambda: address,
        transport=None,
        site=None,
    )


def test_the_requests_daphne_builds_leave_form_bodies_unparsed():
    request = http_protocol.WebRequest(_channel())

    assert request._parsePOSTFormSubmission is False


def test_switching_it_off_twice_wraps_the_request_class_once():
    before = http_protocol.WebRequest
    daphne_form_parsing_off()
    assert http_protocol.WebRequest is before
    assert before.__mro__[1].__name__ == "WebRequest"
    assert before.__mro__[2].__name__ == "Request"
