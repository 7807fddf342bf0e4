"""The OAuth 2.1 authorization server on django-oauth-toolkit: tenant-bound grants and tokens,
the authorization endpoint with its consent page and consent memory (``authorize``, ``forms``,
``consent``, ``RememberedConsent``), client registration and metadata documents (``clients``,
``cimd``), the redirect-URI policy, discovery, token storage, revocation and the OAuth commands
(``revoke_tokens``, ``purge_unused_clients``).

May import: ``core`` and ``accounts``.
"""
