"""Strict readers for settings that come from the environment.

Each helper fails loudly with ImproperlyConfigured on a value it cannot parse, so a typo in a
deployment never silently falls back to a default. Secrets may be given as ``NAME_FILE`` (a path
whose contents are the value), the convention of Docker and Kubernetes secrets.
"""

from __future__ import annotations

import binascii
import os
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from core.uri_schemes import ANY_SCHEME, NO_SCHEMES, private_use_scheme_refusal

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    file_name = os.environ.get(f"{name}_FILE")
    if value is not None and file_name is not None:
        raise ImproperlyConfigured(f"Set {name} or {name}_FILE, not both.")
    if file_name is not None:
        try:
            return Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc}") from exc
    return value


def env_str(name: str, *, default: str | None = None) -> str:
    value = _raw(name)
    if value is None or value == "":
        if default is None:
            raise ImproperlyConfigured(f"The environment variable {name} is required.")
        return default
    return value


def env_optional(name: str) -> str | None:
    value = _raw(name)
    return value or None


def env_bool(name: str, *, default: bool) -> bool:
    value = _raw(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use true or false.")


def env_int(name: str, *, default: int, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from exc
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum of {minimum}.")
    return number


def env_list(name: str, *, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None or value.strip() == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_uri_schemes(name: str, *, default: list[str]) -> list[str]:
    """Private-use redirect URI schemes (``core.uri_schemes``): ``*`` for any that passes the rules,
    ``none`` for none, or a comma-separated list, each a scheme that could pass them (lower-cased)."""
    values = env_list(name, default=default)
    if [value.lower() for value in values] == [NO_SCHEMES]:
        return []
    if ANY_SCHEME in values:
        if values != [ANY_SCHEME]:
            raise ImproperlyConfigured(f"{name}: '*' stands alone; it already allows every scheme.")
        return values
    for value in values:
        refusal = private_use_scheme_refusal(value)
        if refusal is not None:
            raise ImproperlyConfigured(f"{name}: {value!r} {refusal}.")
    return [value.lower() for value in values]


def env_origin(name: str, *, default: str) -> str:
    """An absolute http(s) origin such as ``https://mcp.example.com`` (no path, query or fragment)."""
    return _origin(name, env_str(name, default=default))


def env_origin_list(name: str, *, default: list[str]) -> list[str]:
    """Comma-separated origins, each as ``env_origin`` reads one. No wildcard: a list of origins
    that everyone may use is no list."""
    # Lower case, as browsers serialize an origin, so that a host written in capitals still matches.
    return [_origin(name, value).lower() for value in env_list(name, default=default)]


def _origin(name: str, value: str) -> str:
    value = value.rstrip("/")
    try:
        parts = urlsplit(value)
        hostname, _port = parts.hostname, parts.port
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {value!r} is not a URL ({exc}).") from exc
    if parts.scheme not in {"http", "https"} or not hostname:
        raise ImproperlyConfigured(f"{name}={value!r} must be an absolute http(s) URL.")
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        raise ImproperlyConfigured(f"{name}={value!r} must be an origin only (scheme, host and port).")
    return value


def env_rate(name: str, *, default: str) -> str | None:
    """A rate limit in the ``limits`` notation (``5/minute``, ``100 per hour``); ``none`` for no limit."""
    from limits import parse

    value = env_str(name, default=default).strip()
    if value.lower() == "none":
        return None
    try:
        parse(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not a rate such as 5/minute, or none.") from exc
    return value


def env_fernet_key(name: str) -> str | None:
    """A Fernet key from the environment (or ``NAME_FILE``); a malformed one fails at start."""
    value = env_optional(name)
    if value is not None:
        try:
            Fernet(value)
        except (ValueError, binascii.Error) as exc:
            raise ImproperlyConfigured(f"{name} must be a Fernet key (Fernet.generate_key()).") from exc
    return value


def development_secret_key(*, path: Path, development: bool) -> str | None:
    """The key `make run` generated into ``path``, for a development setup only; else None.

    Read only when no SECRET_KEY (or SECRET_KEY_FILE) is given. A missing or empty file is None, so
    the caller's own refusal (or DEBUG's throwaway key) applies as before.
    """
    if not development:
        return None
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ImproperlyConfigured(f"The development key {path} cannot be read: {exc}") from exc
    return value or None
