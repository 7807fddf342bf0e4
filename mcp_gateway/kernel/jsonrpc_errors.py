"""The one place any exception raised while serving an MCP request becomes a JSON-RPC error.

Its twin for HTTP is ``core.http_errors``; both read the codes the ``core.errors`` classes carry.

Parameters that fail the SDK's own models (a pydantic ``ValidationError``: ``logging/setLevel``
with an unknown level, a capability of the wrong type) are the client's mistake, so -32602 with
a short message naming the first problem. Pydantic's own text repeats the input, which can be
megabytes, so neither the answer nor the log line carries it.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from core.errors import GatehouseError, InvalidInput, Timeout, Unavailable

logger = logging.getLogger(__name__)

INVALID_PARAMS = "Invalid parameters"
# Bounds what a client's input can put in an answer or a log line.
_MAX_LOCATION = 100
_MAX_MESSAGE = 200
_MAX_LOG = 1500


def as_mcp_error(error: BaseException) -> MCPError:
    """The JSON-RPC error a client sees for any exception raised while serving its request."""
    if isinstance(error, MCPError):
        return error
    translated = as_gatehouse_error(error)
    return MCPError(code=translated.jsonrpc_code, message=translated.message, data=translated.data)


def as_gatehouse_error(error: BaseException) -> GatehouseError:
    """The application error (both wire codes) any exception stands for; logs the unexpected."""
    if isinstance(error, GatehouseError):
        return error
    if isinstance(error, ValidationError):
        return _invalid_params(error)
    if isinstance(error, TimeoutError):
        return Timeout()
    if isinstance(error, DatabaseError):
        logger.error("Database unavailable while serving an MCP request", exc_info=error)
        return Unavailable()
    # Internals (messages, stack traces) go to the log, never to the client.
    logger.error("Unexpected error while serving an MCP request", exc_info=error)
    return GatehouseError()


def _invalid_params(error: ValidationError) -> InvalidInput:
    problems = [
        f"{_location(problem['loc'])}: {problem['msg'][:_MAX_MESSAGE]}" for problem in error.errors()[:5]
    ]
    message = f"{INVALID_PARAMS}: {problems[0]}" if problems else INVALID_PARAMS
    if error.error_count() > 1:
        message += f" (and {error.error_count() - 1} more)"
    logger.warning("Invalid MCP request parameters: %s", "; ".join(problems)[:_MAX_LOG])
    return InvalidInput(message[: _MAX_MESSAGE + _MAX_LOCATION + 40])


def _location(location: tuple[int | str, ...]) -> str:
    # Keys come from the client: a dict key can be as long as the body.
    return ".".join(str(part)[:40] for part in location)[:_MAX_LOCATION] or "params"
