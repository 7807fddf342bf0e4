"""What the benchmark scripts share: a free port, waiting for a server, the server's environment, a
prepared database and an access token.

The scripts run as files (``python benchmarks/<script>.py``), so this sits beside them and is
imported by its bare name.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from cryptography.fernet import Fernet
from psycopg import sql

BASE_DIR = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server on port {port} exited early")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not start")


def bench_env(*, public: str, name: str, **overrides: str) -> dict[str, str]:
    """The environment of a benchmark's server (and of the script, which reads the same database):
    its own PostgreSQL database ``gatehouse_bench_<name>`` unless ``BENCH_DATABASE_URL`` names one,
    Redis rate limits under a fresh prefix, rate limits off (``overrides`` may set them) and
    warnings only in the log."""
    return {
        **os.environ,
        "DATABASE_URL": os.environ.get(
            "BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/gatehouse_bench_{name}"
        ),
        "SECRET_KEY": "benchmark-only-" + secrets.token_hex(8),
        "PUBLIC_URL": public,
        "DEMO_PASSWORD": "benchmark-password",
        # The script encrypts nothing itself, but it and the server must read what is stored.
        "DATA_SOURCE_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"),
        "RATE_LIMIT_KEY_PREFIX": f"gatehouse-bench-{name}-" + secrets.token_hex(4),
        "RATE_LIMIT_TOOL": "none",
        # Every simulated client is alice: a session each.
        "MCP_SESSIONS_PER_PERSON": "1000000",
        "RATE_LIMIT_TOOL_EXPENSIVE": "none",
        "RATE_LIMIT_RESOURCE_READ": "none",
        "MCP_SESSION_PURGE_INTERVAL_SECONDS": "0",
        "LOG_LEVEL": "WARNING",
        # The benchmarks' upstream servers listen on loopback, which upstreams may not reach by default.
        "UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8,::1/128",
        **overrides,
    }


def prepare_database(env: dict[str, str]) -> None:
    """Create the benchmark's database if needed, migrate it and run ``bootstrap_demo`` (which also
    stores the sample database's URL again, encrypted under this run's key)."""
    name = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
    admin = env["DATABASE_URL"].replace(f"/{name}", "/postgres", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    for command in (["migrate", "--noinput", "-v0"], ["bootstrap_demo"]):
        subprocess.run(
            [PYTHON, "manage.py", *command], cwd=BASE_DIR, env=env, check=True, capture_output=True
        )


def access_token_for_alice(*, scope: str, resource: str) -> str:
    """An hour's access token for alice in acme, as the OAuth flow would have issued it (Django
    must be set up in this process)."""
    from datetime import timedelta

    from django.utils import timezone
    from oauth2_provider.models import Application

    from accounts.models import Tenant, User
    from oauth.models import AccessToken

    application, _ = Application.objects.get_or_create(
        name="benchmark",
        defaults={
            "client_type": Application.CLIENT_PUBLIC,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": "http://127.0.0.1:9/callback",
        },
    )
    token = secrets.token_urlsafe(30)
    AccessToken.objects.create(
        user=User.objects.get(username="alice"),
        tenant=Tenant.objects.get(slug="acme"),
        application=application,
        token=token,
        scope=scope,
        expires=timezone.now() + timedelta(hours=1),
        resource=[resource],
    )
    return token


@contextlib.contextmanager
def daphne_serving(*, port: int, env: dict[str, str]) -> Iterator[None]:
    """Gatehouse under Daphne on ``port`` for the block; if the block fails, the end of the
    server's log goes to stderr. A SIGTERM to the benchmark still stops the server."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryFile() as log:
        server = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "daphne",
                "-v",
                "0",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "config.asgi:application",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(port, server)
            yield
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read()[-4000:].decode(errors="replace"))
            raise
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
