"""The floor every app stands on: what the whole product needs and no single endpoint owns.

Owns: the error hierarchy (``errors``) and its HTTP translation (``http_errors``); the audit trail
(``models.AuditEvent``, ``audit``, ``audit_entry``, ``audit_export``, ``audit_retention``) and the
CSV export admin lists share (``csv_export``); rate limits
(``models.RateLimitRule``, ``ratelimit``, ``ratelimit_rules``, ``throttles``); metrics (``metrics``);
the request context (request id, client address) and the plain-ASGI helpers (``request_context``,
``asgi_http``); the caller's ``identity``; the async database pool (``db``, ``querycount``);
stored-secret encryption (``crypto``); loopback (``loopback``); the strict environment readers
settings use (``env``); and the typed settings accessor (``conf``).

May import: Django, the libraries in ``pyproject.toml``, and nothing of Gatehouse's. Other apps'
models are named by label (``"accounts.Tenant"``), never imported; an app that wants something here
to know about it registers itself (``metrics.metrics_collector_register``).
"""
