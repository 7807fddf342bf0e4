"""Production safety nets that must stop the process at start-up, not just warn in ``check --deploy``.

Daphne runs no system checks, so a weak secret key would otherwise go live with a warning nobody
reads. The thresholds are Django's own (the ones behind ``security.W009``).
"""

from __future__ import annotations

from django.core.checks.security.base import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
)
from django.core.exceptions import ImproperlyConfigured

WEAK_SECRET_KEY = (
    f"SECRET_KEY is too weak for a deployment on https: use at least {SECRET_KEY_MIN_LENGTH} random "
    "characters, for example the output of "
    "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'."
)


def secret_key_validate(*, key: str) -> None:
    """Refuse a key Django itself would call insecure (short, repetitive, or startproject's)."""
    if (
        len(key) < SECRET_KEY_MIN_LENGTH
        or len(set(key)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS
        or key.startswith(SECRET_KEY_INSECURE_PREFIX)
    ):
        raise ImproperlyConfigured(WEAK_SECRET_KEY)
