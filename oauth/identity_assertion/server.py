"""oauthlib's all-grants server, with the JWT bearer grant for identity assertions beside DOT's
grants (``OAUTH2_SERVER_CLASS``)."""

from __future__ import annotations

from typing import Any

from oauthlib.oauth2 import Server

from oauth.identity_assertion.grant import JWT_BEARER, JwtBearerGrant


class GatehouseServer(Server):
    def __init__(self, request_validator: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(request_validator, *args, **kwargs)
        self.jwt_bearer_grant = JwtBearerGrant(request_validator)
        self._grant_types[JWT_BEARER] = self.jwt_bearer_grant
