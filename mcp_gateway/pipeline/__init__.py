"""What every request passes between the transport and a tool, as SDK server middleware, outermost
first: the audit trail, the SDK's request-state boundary, the guard (toolsets, scopes, arguments,
rate limits), the task gates of 2025-11-25 and of 2026-07-28; and what a tool may ask of the client
while it runs (client requests, input-required rounds, log messages), list changes and resource
subscriptions. ``tool_runs`` runs a tool through all of it from anywhere else. Imports ``kernel``."""
