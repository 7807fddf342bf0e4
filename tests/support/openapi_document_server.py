"""A small REST API for the OpenAPI upstream forms' tests: plain HTTP on loopback (the test settings
let upstreams reach it), serving its own OpenAPI document and the operations that document
describes, so a form's save goes through the real fetch, parse and tool generation."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"
DOCUMENT_PATH = "/openapi.json"
# The operations' ids are the tools' names as generated (already lowercase with underscores).
PETS_TOOLS = ["create_pet", "list_pets", "show_pet"]
PETS_DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Pets", "version": "1.0.0"},
    "servers": [{"url": "/api"}],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "list_pets",
                "summary": "List the pets.",
                "parameters": [
                    {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer"}}
                ],
                "responses": {
                    "200": {
                        "description": "The pets.",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Pet"}}
                            }
                        },
                    }
                },
            },
            "post": {
                "operationId": "create_pet",
                "summary": "Add a pet.",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}},
                },
                "responses": {"201": {"description": "Added."}},
            },
        },
        "/pets/{pet_id}": {
            "get": {
                "operationId": "show_pet",
                "summary": "One pet.",
                "parameters": [
                    {"name": "pet_id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "The pet."}},
            }
        },
    },
    "components": {
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
            }
        }
    },
}


def pets_document_bytes(**changes: Any) -> bytes:
    """The pets document as uploaded (JSON), with top-level ``changes``."""
    return json.dumps({**PETS_DOCUMENT, **changes}).encode("utf-8")


@dataclass
class OpenAPIServer:
    """Serves ``answers[path]`` (status, content type, body); records every path asked for."""

    port: int
    answers: dict[str, tuple[int, str, bytes]] = field(default_factory=dict)
    requested: list[str] = field(default_factory=list)

    def url(self, path: str = "") -> str:
        return f"http://{LOOPBACK}:{self.port}{path}"

    @property
    def document_url(self) -> str:
        return self.url(DOCUMENT_PATH)


def _handler(server: OpenAPIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            server.requested.append(path)
            status, content_type, body = server.answers.get(
                path, (404, "application/json", b'{"error": "not found"}')
            )
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def openapi_server() -> Iterator[OpenAPIServer]:
    """The pets API on a free loopback port: its document at ``DOCUMENT_PATH``, its list of pets
    at ``/api/pets``."""
    state = OpenAPIServer(port=0)
    state.answers[DOCUMENT_PATH] = (200, "application/json", pets_document_bytes())
    state.answers["/api/pets"] = (200, "application/json", b'[{"id": 1, "name": "Rex"}]')
    httpd = ThreadingHTTPServer((LOOPBACK, 0), _handler(state))
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, name="openapi-test-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
