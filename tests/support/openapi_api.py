"""A small REST API on loopback for the OpenAPI upstream tests: it serves its own OpenAPI document,
a few operations (JSON, text, an error, an answer too large), an OAuth 2 token endpoint for client
credentials, and records every request that reached it (method, raw path, query, headers)."""

from __future__ import annotations

import base64
import copy
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

CLIENT_ID = "gatehouse-client"
CLIENT_SECRET = "cl13nt-s3cr3t-openapi-77"
API_KEY = "k3y-openapi-s3cr3t-4411"
BIG_BYTES = 3 * 1024 * 1024

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Pets", "version": "1.0"},
    "servers": [{"url": "/v1"}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List the pets",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                    {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                ],
                "responses": {"200": {"description": "The pets"}},
            },
            "post": {
                "operationId": "createPet",
                "summary": "Add a pet",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}},
                },
                "responses": {"201": {"description": "Added"}},
            },
        },
        "/pets/{petId}": {
            "parameters": [{"$ref": "#/components/parameters/PetId"}],
            "get": {
                "operationId": "showPet",
                "description": "One pet, by its id.",
                "parameters": [{"name": "X-Trace", "in": "header", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The pet"}, "404": {"description": "No such pet"}},
            },
        },
        "/notes": {"get": {"operationId": "readNotes", "responses": {"200": {"description": "Plain text"}}}},
        "/big": {"get": {"operationId": "bigAnswer", "responses": {"200": {"description": "Too much"}}}},
    },
    "components": {
        "parameters": {
            "PetId": {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
        },
        "schemas": {
            "NewPet": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "tag": {"$ref": "#/components/schemas/Tag"}},
            },
            "Tag": {"type": "string", "maxLength": 40},
        },
        "securitySchemes": {
            "cc": {
                "type": "oauth2",
                "flows": {"clientCredentials": {"tokenUrl": "/oauth/token", "scopes": {"pets": "Pets"}}},
            }
        },
    },
}


@dataclass
class OpenApiApi:
    """The API, started on a free loopback port; ``auth`` is what it requires of each call:
    ``none``, ``header`` (X-Api-Key), ``query`` (api_key) or ``oauth`` (a token it issued)."""

    auth: str = "none"
    requests: list[dict[str, Any]] = field(default_factory=list)
    tokens: set[str] = field(default_factory=set)
    token_requests: int = 0
    _server: ThreadingHTTPServer | None = None

    @property
    def origin(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def document_url(self) -> str:
        return f"{self.origin}/openapi.json"

    def document(self) -> dict[str, Any]:
        return copy.deepcopy(DOCUMENT)

    def start(self) -> OpenApiApi:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                api._serve(self, "GET")

            def do_POST(self) -> None:
                api._serve(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _authorized(self, handler: BaseHTTPRequestHandler, query: dict[str, str]) -> bool:
        if self.auth == "header":
            return handler.headers.get("X-Api-Key") == API_KEY
        if self.auth == "query":
            return query.get("api_key") == API_KEY
        if self.auth == "oauth":
            given = handler.headers.get("Authorization", "")
            return given.startswith("Bearer ") and given.removeprefix("Bearer ") in self.tokens
        return True

    def _token(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, str, bytes]:
        self.token_requests += 1
        expected = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        form = dict(parse_qsl(body.decode()))
        if handler.headers.get("Authorization") != f"Basic {expected}" or form.get("grant_type") != (
            "client_credentials"
        ):
            return 401, "application/json", b'{"error": "invalid_client"}'
        token = secrets.token_urlsafe(16)
        self.tokens.add(token)
        answer = {"access_token": token, "token_type": "Bearer", "expires_in": 3600}
        return 200, "application/json", json.dumps(answer).encode()

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        query_pairs = parse_qsl(parts.query, keep_blank_values=True)
        self.requests.append(
            {
                "method": method,
                "path": parts.path,
                "query": query_pairs,
                "headers": dict(handler.headers.items()),
                "body": body.decode(errors="replace"),
            }
        )
        status, media_type, content = self._answer(handler, method, parts.path, dict(query_pairs), body)
        handler.send_response(status)
        handler.send_header("Content-Type", media_type)
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def _answer(
        self, handler: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, str], body: bytes
    ) -> tuple[int, str, bytes]:
        if path == "/openapi.json":
            return 200, "application/json", json.dumps(DOCUMENT).encode()
        if path == "/oauth/token" and method == "POST":
            return self._token(handler, body)
        if not self._authorized(handler, query):
            return 401, "application/json", b'{"error": "unauthorized"}'
        if path == "/v1/pets" and method == "GET":
            pets = [{"id": "1", "name": "Rex"}, {"id": "2", "name": "Tom"}]
            return 200, "application/json", json.dumps(pets[: int(query.get("limit", "10"))]).encode()
        if path == "/v1/pets" and method == "POST":
            pet = {"id": "3", **json.loads(body)}
            return 201, "application/json", json.dumps(pet).encode()
        if path.startswith("/v1/pets/") and method == "GET":
            pet_id = path.removeprefix("/v1/pets/")
            if pet_id == "404":
                return 404, "application/json", b'{"error": "no such pet"}'
            return 200, "application/json", json.dumps({"id": pet_id, "name": "Rex"}).encode()
        if path == "/v1/notes":
            return 200, "text/plain; charset=utf-8", "feed the cat ✓".encode()
        if path == "/v1/big":
            return 200, "application/json", b'"' + b"x" * BIG_BYTES + b'"'
        return 404, "text/plain", b"not found"
