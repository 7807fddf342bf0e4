"""A test identity provider that issues identity assertions (ID-JAG): a real HTTP server on
loopback serving its discovery document and JWKS, and the RS256 key that signs what ``issue``
makes. Gatehouse fetches the keys over HTTP as it would a provider's; nothing is mocked.

    with AssertionIssuer() as idp:
        assertion = idp.issue(sub="dana-1", aud=PUBLIC_URL, client_id=..., resource=MCP_RESOURCE_URL)
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey

ID_JAG_TYPE = "oauth-id-jag+jwt"


def signing_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(4), "use": "sig", "alg": "RS256"})


class AssertionIssuer:
    def __init__(self) -> None:
        self.key = RSAKey.generate_key(
            2048, parameters={"kid": secrets.token_hex(4), "use": "sig", "alg": "RS256"}
        )
        self.requests = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.requests += 1
                body: dict[str, Any]
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.issuer, "jwks_uri": f"{issuer.issuer}/jwks"}
                elif self.path == "/jwks":
                    body = {"keys": [issuer.key.as_dict(private=False)]}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> AssertionIssuer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.server.shutdown()
        self.server.server_close()

    def rotate(self) -> None:
        """A new signing key (with a new key id), as a provider rotates its keys."""
        self.key = RSAKey.generate_key(
            2048, parameters={"kid": secrets.token_hex(4), "use": "sig", "alg": "RS256"}
        )

    def issue(
        self,
        *,
        key: RSAKey | None = None,
        header: dict[str, Any] | None = None,
        lifetime: int = 300,
        **claims: Any,
    ) -> str:
        """An assertion with ``claims`` (``iss``, ``iat``, ``exp`` and a fresh ``jti`` unless
        given), signed by this provider's key or ``key``."""
        now = int(time.time())
        signing = key or self.key
        values = {
            "iss": self.issuer,
            "iat": now,
            "exp": now + lifetime,
            "jti": secrets.token_urlsafe(12),
            **claims,
        }
        values = {name: value for name, value in values.items() if value is not None}
        protected = {"alg": "RS256", "typ": ID_JAG_TYPE, "kid": signing.kid, **(header or {})}
        return jwt.encode(protected, values, signing)
