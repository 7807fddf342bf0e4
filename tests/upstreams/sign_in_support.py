"""A local MCP endpoint behind an authorization-code authorization server, in a thread of the test
process (loopback): protected resource and server metadata, dynamic registration, a token endpoint
that checks the PKCE verifier, and an MCP endpoint that answers ``initialize`` to its own tokens only.
Its authorization endpoint is never visited: the tests play the admin's browser themselves."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class SignInServer:
    base: str = ""
    # code -> PKCE challenge of the authorization it was issued for
    codes: dict[str, str] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    registrations: int = 0
    token_requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def code_for(self, authorization_url: str) -> str:
        """What the server would redirect the browser back with for this authorization URL."""
        query = parse_qs(urlsplit(authorization_url).query)
        code = secrets.token_urlsafe(16)
        self.codes[code] = query["code_challenge"][0]
        return code


def _handler(server: SignInServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None

        def _json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/.well-known/oauth-protected-resource/mcp":
                self._json(200, {"resource": server.url, "authorization_servers": [server.base]})
            elif path == "/.well-known/oauth-authorization-server":
                self._json(
                    200,
                    {
                        "issuer": server.base,
                        "authorization_endpoint": f"{server.base}/authorize",
                        "token_endpoint": f"{server.base}/token",
                        "registration_endpoint": f"{server.base}/register",
                        "response_types_supported": ["code"],
                        "grant_types_supported": ["authorization_code", "refresh_token"],
                        "code_challenge_methods_supported": ["S256"],
                        "token_endpoint_auth_methods_supported": ["none"],
                    },
                )
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            body = self._body()
            if path == "/register":
                server.registrations += 1
                metadata = json.loads(body)
                self._json(
                    201,
                    {
                        **metadata,
                        "client_id": f"client-{server.registrations}",
                        "token_endpoint_auth_method": "none",
                    },
                )
            elif path == "/token":
                form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
                server.token_requests.append(form)
                challenge = server.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "")
                digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
                if challenge is None or digest.decode() != challenge:
                    self._json(400, {"error": "invalid_grant"})
                    return
                token = secrets.token_urlsafe(16)
                server.tokens.add(token)
                self._json(
                    200,
                    {"access_token": token, "token_type": "Bearer", "expires_in": 3600, "refresh_token": "r"},
                )
            elif path == "/mcp":
                auth = self.headers.get("Authorization", "")
                if not auth.startswith("Bearer ") or auth[7:] not in server.tokens:
                    metadata = f"{server.base}/.well-known/oauth-protected-resource/mcp"
                    challenge = f'Bearer error="invalid_token", resource_metadata="{metadata}"'
                    self._json(401, {"error": "invalid_token"}, {"WWW-Authenticate": challenge})
                    return
                request = json.loads(body)
                result = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "serverInfo": {"name": "sign-in-test", "version": "1"},
                }
                self._json(200, {"jsonrpc": "2.0", "id": request.get("id"), "result": result})
            else:
                self._json(404, {"error": "not_found"})

    return Handler


@contextmanager
def sign_in_server() -> Iterator[SignInServer]:
    state = SignInServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
