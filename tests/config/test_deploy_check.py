"""Production settings: `manage.py check --deploy` is clean behind TLS, and development stays usable.

Settings are read once per process, so each case starts a fresh Python process with its own
environment, as a deployment would.
"""

from __future__ import annotations

import json
import os
import secrets

import pytest

from config.security import WEAK_SECRET_KEY
from tests.support.python_process import python_run

PUBLIC_URL = "https://mcp.example.com"
ONE_YEAR = 365 * 24 * 3600

# Reports what a process with the given environment actually configured, and how its security
# middleware answers a page, the health check and a request the TLS proxy marked as https.
_PROBE = """
import json, django
django.setup()
from django.conf import settings as s
from django.test import Client
host = s.ALLOWED_HOSTS[0]
client = Client(HTTP_HOST=host)
login = client.get("/accounts/login/")
health = client.get("/health")
proxied = client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
print(json.dumps({
    "hsts_seconds": s.SECURE_HSTS_SECONDS,
    "hsts_subdomains": s.SECURE_HSTS_INCLUDE_SUBDOMAINS,
    "hsts_preload": s.SECURE_HSTS_PRELOAD,
    "ssl_redirect": s.SECURE_SSL_REDIRECT,
    "proxy_header": s.SECURE_PROXY_SSL_HEADER,
    "session_cookie_secure": s.SESSION_COOKIE_SECURE,
    "csrf_cookie_secure": s.CSRF_COOKIE_SECURE,
    "csrf_trusted_origins": s.CSRF_TRUSTED_ORIGINS,
    "plain_login": [login.status_code, login.get("Location")],
    "plain_health": health.status_code,
    "proxied_login": [proxied.status_code, proxied.get("Strict-Transport-Security")],
}))
"""


def _production_env(**overrides: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SECURE_", "SECRET_KEY", "DEBUG", "PUBLIC_URL", "ALLOWED_HOSTS"))
    }
    env.update(
        {
            "DEBUG": "false",
            "PUBLIC_URL": PUBLIC_URL,
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "ERROR",
        }
    )
    env.update(overrides)
    return env


def _probe(env: dict[str, str]) -> dict:
    result = python_run(["-c", _PROBE], env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_deploy_check_reports_nothing_with_production_settings():
    result = python_run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], _production_env())

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_settings_turn_on_hsts_secure_cookies_and_the_proxy_header():
    configured = _probe(_production_env())

    assert configured["hsts_seconds"] == ONE_YEAR
    assert configured["hsts_subdomains"] is True
    assert configured["hsts_preload"] is False
    assert configured["ssl_redirect"] is True
    assert configured["proxy_header"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert configured["session_cookie_secure"] is True
    assert configured["csrf_cookie_secure"] is True
    assert configured["csrf_trusted_origins"] == [PUBLIC_URL]


def test_behind_the_tls_proxy_pages_carry_hsts_and_plain_http_is_sent_to_https():
    configured = _probe(_production_env())

    status, location = configured["plain_login"]
    assert status == 301
    assert location == f"{PUBLIC_URL}/accounts/login/"
    proxied_status, hsts = configured["proxied_login"]
    assert proxied_status == 200
    assert hsts == f"max-age={ONE_YEAR}; includeSubDomains"


def test_the_health_check_is_not_redirected_for_load_balancers_probing_over_http():
    configured = _probe(_production_env(DATABASE_URL="postgres://nobody@127.0.0.1:1/none"))

    # No database answers here, so 503: the point is that it is not a 301.
    assert configured["plain_health"] == 503


def test_hsts_and_the_https_redirect_follow_the_environment():
    configured = _probe(
        _production_env(
            SECURE_HSTS_SECONDS="600",
            SECURE_HSTS_INCLUDE_SUBDOMAINS="false",
            SECURE_HSTS_PRELOAD="true",
            SECURE_SSL_REDIRECT="false",
        )
    )

    assert configured["hsts_seconds"] == 600
    assert configured["hsts_subdomains"] is False
    assert configured["hsts_preload"] is True
    assert configured["ssl_redirect"] is False
    assert configured["plain_login"] == [200, None]
    assert configured["proxied_login"] == [200, "max-age=600; preload"]


def test_a_misspelt_security_flag_stops_the_process():
    result = python_run(["-c", _PROBE], _production_env(SECURE_SSL_REDIRECT="ture"))

    assert result.returncode != 0
    assert "SECURE_SSL_REDIRECT='ture' is not a boolean" in result.stderr


@pytest.mark.parametrize(
    "weak_key",
    [
        pytest.param("test", id="short"),
        pytest.param("ab" * 40, id="repetitive"),
        pytest.param("django-insecure-" + secrets.token_urlsafe(50), id="startproject-default"),
    ],
)
def test_a_weak_secret_key_stops_a_production_start(weak_key):
    result = python_run(["-c", _PROBE], _production_env(SECRET_KEY=weak_key))

    assert result.returncode != 0
    assert WEAK_SECRET_KEY in result.stderr


def test_a_production_start_without_any_secret_key_is_refused():
    env = _production_env()
    del env["SECRET_KEY"]

    result = python_run(["-c", _PROBE], env)

    assert result.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) is required" in result.stderr


def test_an_http_public_url_keeps_development_usable():
    configured = _probe(_production_env(PUBLIC_URL="http://127.0.0.1:8000", SECRET_KEY="dev"))

    assert configured["hsts_seconds"] == 0
    assert configured["ssl_redirect"] is False
    assert configured["proxy_header"] is None
    assert configured["session_cookie_secure"] is False
    assert configured["csrf_cookie_secure"] is False
    assert configured["csrf_trusted_origins"] == ["http://127.0.0.1:8000"]
    assert configured["plain_login"] == [200, None]
    assert configured["proxied_login"] == [200, None]
