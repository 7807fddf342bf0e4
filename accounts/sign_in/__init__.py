"""Sign-in through a tenant's OpenID Connect provider: the role a person's claims give them
(``roles``), who the person is and what they may do in the tenant (``people``), and the
authorization code flow with the provider itself (``oidc``)."""
