"""How requests reach the pipeline: the ASGI layers in front of the SDK, outermost first: ``failsafe``
(anything unexpected becomes JSON-RPC and a ``server.error`` row), ``auth`` (Host/Origin, bearer
token, ``bearer``), ``envelope`` (one bounded read and parse of the body, JSON-RPC envelope errors),
then for handshake-era requests ``sessions`` (sessions persisted in PostgreSQL) and
``exchange_handshake_era``, for 2026-07-28 requests ``exchange_2026_07_28``; the response and
standalone streams, step-up challenges, the cross-worker relay, and stdio for desktop clients.
``endpoint`` assembles them. Imports ``pipeline`` and ``kernel``."""
