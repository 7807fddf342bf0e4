"""The one place any exception raised while serving an MCP request becomes a JSON-RPC error.

Its twin for HTTP is ``core.http_errors``; both read the codes the ``core.errors`` classes carry.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError
from mcp.shared.exceptions import MCPError

from core.errors import GatehouseError, Timeout, Unavailable

logger = logging.getLogger(__name__)


def as_mcp_error(error: BaseException) -> MCPError:
    """The JSON-RPC error a client sees for any exception raised while serving its request."""
    if isinstance(error, MCPError):
        return error
    if isinstance(error, GatehouseError):
        translated = error
    elif isinstance(error, TimeoutError):
        translated = Timeout()
    elif isinstance(error, DatabaseError):
        logger.error("Database unavailable while serving an MCP request", exc_info=error)
        translated = Unavailable()
    else:
        # Internals (messages, stack traces) go to the log, never to the client.
        logger.error("Unexpected error while serving an MCP request", exc_info=error)
        translated = GatehouseError()
    return MCPError(code=translated.jsonrpc_code, message=translated.message, data=translated.data)
