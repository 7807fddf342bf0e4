"""Daphne without Twisted's form parsing, and with every standard reason phrase.

Twisted's ``Request.requestReceived`` parses every POST whose body has a Content-Type into
``request.args`` (form fields), and to learn the content type it builds an ``email.message``
object, for every MCP call (its cost is in docs/benchmarks.md). Daphne never reads
``request.args``; it hands the raw body to the application. Twisted lets a request switch the
parsing off (``parsePOSTFormSubmission``), and Daphne picks its request class by module name when it
builds each connection, so a subclass that switches it off is all it takes.

``daphne_form_parsing_off()`` is called when ``config.asgi`` is imported, which both ``daphne
config.asgi:application`` and ``manage.py prepare_run --serve`` do before the first connection.
Under another ASGI server it changes nothing.

Twisted's table of reason phrases stops short of several statuses Gatehouse answers (429 above
all, also 422 and 421), and Daphne passes no phrase of its own, so clients read "HTTP/1.1 429
Unknown Status". ``daphne_reason_phrases()`` fills the table's gaps from Python's own
``http.HTTPStatus`` once, at the same import.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any


def daphne_form_parsing_off() -> None:
    try:
        from daphne import http_protocol
    except ImportError:  # not served by Daphne
        return
    if getattr(http_protocol.WebRequest, "_gatehouse_formless", False):
        return

    class FormlessWebRequest(http_protocol.WebRequest):
        _gatehouse_formless = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Read once per request, in requestReceived, after __init__.
            self._parsePOSTFormSubmission = False

    http_protocol.WebRequest = FormlessWebRequest


def daphne_reason_phrases() -> None:
    try:
        from twisted.web import http as twisted_http
    except ImportError:  # not served by Daphne
        return
    for status in HTTPStatus:
        twisted_http.RESPONSES.setdefault(status.value, status.phrase.encode("ascii"))
