"""The project itself: settings (read through ``core.env``), URLs, the ASGI application, logging,
start-up security checks and ``/health``. Imports anything."""
