"""The keys Gatehouse's ASGI layers add to a request's scope, and who writes and reads each.

They are the contract between the layers and the code behind the SDK: one definition here, so a
reader imports a key without importing the layer that happens to write it.
"""

from __future__ import annotations

# The caller's ``core.identity.Identity``. Written by ``transport.auth``; narrowed by
# ``transport.sessions`` to the scopes the session opened with. Read through
# ``identity.identity_from_request`` (guard, audit trail, handlers, request-state sealing) and by
# ``transport.endpoint.EraRouter`` for step-up challenges.
IDENTITY_KEY = "gatehouse.identity"

# The ``sessions.LiveSession`` the request's ``Mcp-Session-Id`` names, as the authenticating query
# found it, or None. Written by ``transport.auth``; read by ``transport.sessions``, which decides its fate.
LIVE_SESSION_KEY = "gatehouse.live_session"

# The POST body's JSON-RPC message, parsed once. Written by ``transport.envelope``; read by
# ``transport.sessions`` and ``transport.exchange_handshake_era``.
MESSAGE_KEY = "gatehouse.message"

# The same message as the SDK's schema read it (``JSONRPCRequest``, ``JSONRPCNotification``, …),
# validated once. Written by ``transport.envelope``; read by ``transport.exchange_2026_07_28``.
TYPED_MESSAGE_KEY = "gatehouse.typed_message"

# The live, validated ``sessions.LiveSession`` of a handshake-era request. Written by
# ``transport.sessions``; read by ``transport.exchange_handshake_era``, ``transport.endpoint``
# (logging/setLevel), ``audit_trail`` and ``client_log``.
SESSION_KEY = "gatehouse.session"

# On an ``initialize`` POST, the ``exchange.InitializedHook`` that opens the session once the server
# accepted the handshake and returns the headers that name it. Written by ``transport.sessions``; read by
# ``transport.exchange_handshake_era``.
INITIALIZED_HOOK_KEY = "gatehouse.on_initialized"

# What ran a tool call when no client called it directly (``workflow:<command>``), for its audit
# row's ``detail.via``. Written by ``pipeline.tool_runs``; read by ``pipeline.audit_trail``.
VIA_KEY = "gatehouse.via"
