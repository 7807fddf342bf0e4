"""The ASGI layers in front of the SDK, outermost first: ``failsafe`` (anything unexpected becomes
JSON-RPC and a ``server.error`` row), ``auth`` (Host/Origin, bearer token), ``envelope`` (one
bounded read and parse of the body, JSON-RPC envelope errors), then, for handshake-era requests,
``sessions`` (sessions persisted in PostgreSQL). ``refusals`` writes the audit rows of what they
refuse. What each layer leaves in the ASGI scope for the code behind it is named in ``scope_keys``."""
