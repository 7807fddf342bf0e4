"""``manage.py upstreams add`` for an OpenAPI upstream (its document by URL or from a file, an API
key in the query from stdin) and for the protocol and sign-in options; misplaced options are refused
with a message, never a traceback."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from core.crypto import secret_decrypt
from tests.support.openapi_api import API_KEY, DOCUMENT, OpenApiApi
from upstreams.management.commands import upstreams as command
from upstreams.models import AuthKind, Transport, Upstream

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def api():
    server = OpenApiApi().start()
    yield server
    server.stop()


def _add(*args: str, stdin: str | None = None) -> None:
    options = {"stdin": io.StringIO(stdin)} if stdin is not None else {}
    call_command("upstreams", "add", *args, **options)


def test_an_openapi_upstream_is_added_from_its_documents_url(tenant, api, capfd):
    _add(tenant.slug, "pets", "--openapi-url", api.document_url, "--prefix")

    stored = Upstream.objects.get(tenant=tenant, name="pets")
    assert stored.transport == Transport.OPENAPI
    assert stored.url == f"{api.origin}/v1"
    assert "Connected: 5 tools: pets_bigAnswer, pets_createPet" in capfd.readouterr().out


def test_a_document_file_with_a_base_url_and_a_query_key_from_stdin(tenant, api, tmp_path):
    document = tmp_path / "pets.json"
    document.write_text(json.dumps(DOCUMENT))

    _add(
        tenant.slug,
        "pets",
        "--openapi-file",
        str(document),
        "--base-url",
        f"{api.origin}/v1",
        "--query-key",
        "api_key",
        "--secret-stdin",
        stdin=API_KEY + "\n",
    )

    stored = Upstream.objects.get(tenant=tenant, name="pets")
    assert stored.auth == AuthKind.QUERY
    assert stored.header_name == "api_key"
    assert secret_decrypt(token=stored.header_value_encrypted) == API_KEY
    assert stored.openapi_url == ""


def test_an_unreadable_or_hostile_document_file_is_refused_with_a_message(tenant, tmp_path):
    hostile = tmp_path / "hostile.yaml"
    hostile.write_bytes(b"\xff\xfe\x00openapi: 3.1.0")

    with pytest.raises(CommandError) as missing:
        _add(
            tenant.slug,
            "pets",
            "--openapi-file",
            str(tmp_path / "absent.json"),
            "--base-url",
            "http://x.test",
        )
    with pytest.raises(CommandError) as garbled:
        _add(tenant.slug, "pets", "--openapi-file", str(hostile), "--base-url", "http://x.test")

    assert str(missing.value).startswith("--openapi-file: ")
    assert "cannot be read" in str(missing.value)
    assert "UTF-8" in str(garbled.value)
    assert not Upstream.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--url", "http://x.test/mcp", "--base-url", "http://x.test"],
            "--base-url: only with --openapi-url",
        ),
        (["--url", "http://x.test/mcp", "--query-key", "k"], "--query-key: only with --openapi-url"),
        (["--openapi-url", "http://x.test/d.json", "--transport", "sse"], command.TRANSPORT_WITH_OPENAPI),
        (["--url", "http://x.test/mcp", "--header", "X-Key", "--oauth-sign-in"], command.HEADER_AND_OAUTH),
    ],
)
def test_misplaced_options_are_refused(tenant, args, message):
    with pytest.raises(CommandError) as refused:
        _add(tenant.slug, "pets", *args)

    assert str(refused.value).startswith(message)


def test_the_protocol_and_sign_in_are_stored_as_given(tenant):
    _add(
        tenant.slug,
        "signs-in",
        "--url",
        "http://x.test/mcp",
        "--oauth-sign-in",
        "--protocol",
        "handshake",
        "--disabled",
    )

    stored = Upstream.objects.get(tenant=tenant, name="signs-in")
    assert stored.auth == AuthKind.OAUTH_CODE
    assert stored.protocol == "handshake"
