"""The people-facing pages and what only they need: sign-in (``login``), a person's connected
applications and MCP sessions (``connected``, ``views``), and ``bootstrap_demo``.

Owns no model. May import every app below it (core, accounts, oauth, mcp_gateway, the toolsets),
because what it shows spans them all: a connection is an OAuth token, a remembered consent and
MCP sessions at once, and the demo seeds a tenant, people, a sample database and a model. Only
``config`` (settings, URLs, ASGI) imports it.
"""
