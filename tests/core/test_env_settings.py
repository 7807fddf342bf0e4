from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_int, env_list, env_origin, env_origin_list, env_str


def test_it_reads_booleans_strictly(monkeypatch):
    monkeypatch.setenv("FLAG", "yes")
    assert env_bool("FLAG", default=False) is True
    monkeypatch.setenv("FLAG", "Off")
    assert env_bool("FLAG", default=True) is False
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG"):
        env_bool("FLAG", default=False)


def test_it_uses_the_default_only_when_unset(monkeypatch):
    monkeypatch.delenv("NUMBER", raising=False)
    assert env_int("NUMBER", default=7) == 7
    monkeypatch.setenv("NUMBER", "seven")
    with pytest.raises(ImproperlyConfigured):
        env_int("NUMBER", default=7)
    monkeypatch.setenv("NUMBER", "0")
    with pytest.raises(ImproperlyConfigured, match="minimum"):
        env_int("NUMBER", default=7, minimum=1)


def test_it_requires_values_without_a_default(monkeypatch):
    monkeypatch.delenv("REQUIRED_THING", raising=False)
    with pytest.raises(ImproperlyConfigured, match="REQUIRED_THING"):
        env_str("REQUIRED_THING")


def test_it_reads_secrets_from_files(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.delenv("API_SECRET", raising=False)
    monkeypatch.setenv("API_SECRET_FILE", str(secret))
    assert env_str("API_SECRET") == "s3cret"
    monkeypatch.setenv("API_SECRET", "also")
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env_str("API_SECRET")


def test_it_refuses_an_unreadable_secret_file(monkeypatch, tmp_path):
    monkeypatch.delenv("API_SECRET", raising=False)
    monkeypatch.setenv("API_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_str("API_SECRET")


def test_it_splits_lists(monkeypatch):
    monkeypatch.setenv("HOSTS", "a.example, b.example,,")
    assert env_list("HOSTS", default=[]) == ["a.example", "b.example"]


@pytest.mark.parametrize(
    "value", ["ftp://host", "https://host/path", "not a url", "https://user:pw@host", "https://host?x=1"]
)
def test_it_accepts_only_origins_as_the_public_url(monkeypatch, value):
    monkeypatch.setenv("PUBLIC_URL", value)
    with pytest.raises(ImproperlyConfigured):
        env_origin("PUBLIC_URL", default="http://127.0.0.1:8000")


def test_it_normalises_a_trailing_slash_on_the_public_url(monkeypatch):
    monkeypatch.setenv("PUBLIC_URL", "https://mcp.example.com/")
    assert env_origin("PUBLIC_URL", default="http://x") == "https://mcp.example.com"


def test_allowed_origins_are_read_as_origins_in_lower_case(monkeypatch):
    monkeypatch.setenv("MCP_ALLOWED_ORIGINS", "https://Inspector.Example, http://localhost:6274/")
    assert env_origin_list("MCP_ALLOWED_ORIGINS", default=[]) == [
        "https://inspector.example",
        "http://localhost:6274",
    ]


@pytest.mark.parametrize(
    "value",
    ["*", "null", "inspector.example", "https://a.example/path", "https://[::1", "https://a.example:99999"],
)
def test_an_allowed_origin_that_is_no_origin_stops_the_start(monkeypatch, value):
    # "inspector.example" has no scheme: compared by scheme and host, it would match "null".
    monkeypatch.setenv("MCP_ALLOWED_ORIGINS", f"https://ok.example,{value}")
    with pytest.raises(ImproperlyConfigured):
        env_origin_list("MCP_ALLOWED_ORIGINS", default=[])
