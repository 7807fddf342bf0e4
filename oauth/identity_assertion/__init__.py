"""Enterprise-managed authorization: an identity assertion (ID-JAG) a tenant's identity provider
issued for one person, one client and one of our resources, exchanged at the token endpoint with
the JWT bearer grant (RFC 7523) for an access token, with no browser and no consent screen
(``keys``: the providers' signing keys; ``verify``: the assertion's checks; ``grant``: the grant)."""
