"""platform/compose.yaml and the env example, read as Docker Compose would read them, offline (no
container engine runs on a CI machine): the Compose Specification's schema (check-jsonschema
vendors it), several web replicas behind nginx after one migration, health checks, the shared
nginx proxy settings, no secret in the file; and platform/ never a Python package. The Kubernetes
manifests are tests/deploy/test_platform_manifests.py's.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import jsonschema
import pytest
import yaml
from django.urls import resolve

from config.health import health
from tests.deploy.test_platform_manifests import (
    COMPOSE,
    PLATFORM,
    SECRET_SETTINGS,
    _documented_settings,
    _is_setting,
)

# Compose


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def _compose_schema() -> dict[str, Any]:
    schema = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json")
    return json.loads(schema.read_text())


def test_the_compose_file_follows_the_compose_specification():
    jsonschema.validate(_compose(), _compose_schema())


def test_the_compose_schema_refuses_a_broken_file():
    broken = _compose()
    broken["services"]["web"]["depends_on"]["migrate"]["condition"] = "service_finished"

    with pytest.raises(jsonschema.ValidationError, match="service_finished"):
        jsonschema.validate(broken, _compose_schema())


def test_compose_runs_several_web_replicas_behind_nginx_after_one_migration():
    services = _compose()["services"]
    assert {"db", "redis", "migrate", "web", "worker", "nginx"} <= services.keys()
    web, migrate = services["web"], services["migrate"]

    assert web["deploy"]["replicas"] > 1
    assert "ports" not in web
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert migrate["restart"] == "no"
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    others_migrating = [
        n for n, s in services.items() if n != "migrate" and "migrate" in s.get("command", [])
    ]
    assert not others_migrating
    assert services["nginx"]["depends_on"]["web"] == {"condition": "service_healthy"}


def test_compose_checks_the_health_of_the_database_redis_and_web():
    services = _compose()["services"]
    for name in ("db", "redis", "web"):
        assert services[name]["healthcheck"]["test"], name
    assert "http://127.0.0.1:8000/health'" in services["web"]["healthcheck"]["test"][-1]
    assert resolve("/health").func is health


def test_compose_nginx_includes_the_shared_proxy_settings_and_proxies_to_every_web_replica():
    nginx = _compose()["services"]["nginx"]
    mounts = dict(volume.rsplit(":", 2)[:2] for volume in nginx["volumes"])

    assert mounts["./nginx/gatehouse-proxy.conf"] == "/etc/nginx/gatehouse-proxy.conf"
    server = (COMPOSE.parent / "nginx" / "compose.conf").read_text()
    assert mounts["./nginx/compose.conf"] == "/etc/nginx/conf.d/default.conf"
    assert "include /etc/nginx/gatehouse-proxy.conf;" in server
    assert re.search(r"^\s*server web:8000 resolve;", server, re.M)
    assert re.search(r"^resolver 127\.0\.0\.11 ", server, re.M)


def test_compose_has_no_secret_in_it():
    services = _compose()["services"]
    secrets = SECRET_SETTINGS | {"POSTGRES_PASSWORD"}
    for name, service in services.items():
        environment = service.get("environment", {})
        assert not secrets & set(environment), name
    for name in ("migrate", "web", "worker"):
        assert services[name]["env_file"] == ["gatehouse.env"]
    assert services["db"]["env_file"] == ["postgres.env"]
    assert {"/gatehouse.env", "/postgres.env"} <= set((PLATFORM / ".gitignore").read_text().split())


def test_the_env_example_sets_only_gatehouse_settings():
    documented = _documented_settings()
    lines = (PLATFORM / "gatehouse.env.example").read_text().splitlines()
    names = {line.split("=", 1)[0] for line in lines if line and not line.startswith("#")}

    assert names >= SECRET_SETTINGS
    assert not {n for n in names if not _is_setting(n, documented)}


def test_platform_is_never_a_python_package():
    # A package named platform would shadow the standard library's (litellm, httpx, Twisted use it).
    assert not list(PLATFORM.rglob("*.py"))
