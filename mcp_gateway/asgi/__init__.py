"""The ASGI layers in front of the SDK, outermost first: ``auth`` (Host/Origin, bearer token),
``envelope`` (one read of the body, JSON-RPC envelope errors), then, for handshake-era requests,
``sessions`` (sessions persisted in PostgreSQL). What each layer leaves in the ASGI scope for the
code behind it is named in ``scope_keys``."""
