"""A client's metadata document host for tests: HTTPS on loopback with a certificate made for the
run, so the real fetcher (TLS, address checks, size and type limits) is what the tests exercise."""

from __future__ import annotations

import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

LOOPBACK = "127.0.0.1"


def certificate_write(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost; returns (cert, key) PEM paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gatehouse test document host")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class Answer:
    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})


@dataclass
class DocumentServer:
    """Serves ``answers[path]``; records every path asked for."""

    port: int
    ca_bundle: Path
    answers: dict[str, Answer] = field(default_factory=dict)
    requested: list[str] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"https://{LOOPBACK}:{self.port}{path}"

    def publish(self, path: str, document: dict, *, cache_control: str | None = None) -> str:
        headers = {"Content-Type": "application/json"}
        if cache_control:
            headers["Cache-Control"] = cache_control
        self.answers[path] = Answer(body=json.dumps(document).encode(), headers=headers)
        return self.url(path)


def client_document(
    client_id: str, *, redirect_uris: list[str], name: str = "Metadata Document Client"
) -> dict:
    return {
        "client_id": client_id,
        "client_name": name,
        "redirect_uris": redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


@contextmanager
def document_server(directory: Path) -> Iterator[DocumentServer]:
    cert_path, key_path = certificate_write(directory)
    state: dict[str, DocumentServer] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server = state["server"]
            server.requested.append(self.path)
            answer = server.answers.get(self.path) or Answer(body=b"{}", status=404)
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer((LOOPBACK, 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    state["server"] = DocumentServer(port=int(httpd.server_address[1]), ca_bundle=cert_path)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state["server"]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
