"""The MCP endpoint: the SDK's server behind Gatehouse's ASGI layers (host and origin checks,
bearer authentication, JSON-RPC envelope, sessions kept in the database), the request guard
(toolsets per tenant, scopes, argument validation, rate limits, the JSON-RPC error translation),
the tool registry toolsets plug into, the relay that carries client answers between workers, and
the ``account`` and ``conformance`` toolsets that belong to the endpoint itself.

May import: ``core``, ``accounts`` and ``oauth``. Toolsets import it (the registry, the caller's
identity, client requests); it never imports a toolset: settings name them (``GATEHOUSE_TOOLSETS``).
"""
