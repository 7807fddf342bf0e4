"""How log lines look: one JSON object per line by default, each carrying its request id.

``LOG_FORMAT`` picks ``json`` (for log shippers: every line parses on its own, fields are
searchable) or ``plain`` (for a person at a terminal). Both carry the request id of the HTTP
request being served (``core.request_context``), so one id ties an access line, the application's
own lines and the audit trail together.
"""

from __future__ import annotations

import logging
import logging.config
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from core.env import env_str
from core.request_context import current_request_id

LOG_FORMATS = ("json", "plain")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def env_log_format(name: str = "LOG_FORMAT", *, default: str = "json") -> str:
    value = env_str(name, default=default).strip().lower()
    if value not in LOG_FORMATS:
        raise ImproperlyConfigured(f"{name}={value!r} is not a log format; use json or plain.")
    return value


class RequestIdFilter(logging.Filter):
    """Stamps each record with the current request id ("" outside a request).

    Attached to the handler rather than to loggers, so records from every library get it too. A
    record that already carries one (``extra={"request_id": ...}``) keeps it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = current_request_id()
        return True


class JsonLogFormatter(JsonFormatter):
    """timestamp, level, logger, message, request_id, then any ``extra`` fields and the exception."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s %(request_id)s",
            rename_fields={"levelname": "level", "name": "logger", "exc_info": "exception"},
            # Django attaches the request object to its django.request lines; its repr holds the
            # query string, where OAuth codes travel. The access line has method and path.
            reserved_attrs=[*RESERVED_ATTRS, "request"],
            **kwargs,
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        # First, so that a line read by eye starts with when it happened.
        log_data["timestamp"] = datetime.fromtimestamp(record.created, tz=UTC).isoformat(
            timespec="milliseconds"
        )
        super().add_fields(log_data, record, message_dict)


def logging_configure(config: dict[str, Any]) -> None:
    """Django's ``LOGGING_CONFIG``: ``dictConfig``, and Python's warnings routed through logging,
    so that a warning becomes a log line like any other instead of raw text on stderr."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)
    # Neither format writes the caller's file and line, thread or process: not looked up for every
    # line (Python's logging HOWTO, "Optimization"), which the access log writes per request.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
