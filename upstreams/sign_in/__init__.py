"""Upstreams that sign in with OAuth (authorization code with PKCE): the grant Gatehouse keeps for
each, the SDK provider its sessions use, and the console's connect flow."""
