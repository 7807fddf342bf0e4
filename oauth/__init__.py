"""The OAuth 2.1 authorization server (django-oauth-toolkit) and what every protected resource
checks of a bearer token (``bearer``, ``challenge``). Imports ``core`` and ``accounts``."""
