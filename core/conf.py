"""Gatehouse's own settings (``settings.GATEHOUSE``), typed, and read when they are used.

Code reads ``gatehouse_settings.MCP_DB_POOL_SIZE``, never ``settings.GATEHOUSE["..."]``: mypy then
sees an ``int`` rather than ``Any``, a misspelt name fails type checking instead of raising
``KeyError`` in production, and a value of the wrong type (a test override, a hand-edited
settings module) raises ``ImproperlyConfigured`` naming the key at its first read.

Each attribute is read and checked at its first use and kept until Django says that ``GATEHOUSE``
changed (its ``setting_changed`` signal: ``override_settings``, pytest-django's ``settings``
fixture), so an override is seen by the next call; the MCP endpoint reads several keys on every
call, and reading Django's lazy settings each time cost more than the call's rate-limit check.
Assign a new ``GATEHOUSE`` dict to override; one changed in place goes unnoticed. Nothing here is
computed at import.

Names: every key is named after the environment variable ``config/settings.py`` reads it from,
so one name means one setting from the deployment to the code. Where a key is more than its
variable's value:

- ``CIMD_ALLOW_LOOPBACK``: the variable of that name, refused unless ``PUBLIC_URL`` is loopback;
- ``LLM_MOCK_RESPONSES_FILE``: likewise (tests only);
- ``RATE_LIMIT_STORAGE_URL``: that variable, else ``REDIS_URL``, else ``memory://``;
- ``RATE_LIMITS``: the family ``RATE_LIMIT_<SCOPE>``, one dict keyed by rate-limit scope
  (``core.models.RateLimitScope`` and ``tool_expensive``): ``tool`` from ``RATE_LIMIT_TOOL``,
  ``tool_expensive`` from ``RATE_LIMIT_TOOL_EXPENSIVE``, ``resource`` from
  ``RATE_LIMIT_RESOURCE_READ``, ``authorize`` from ``RATE_LIMIT_AUTHORIZE``, ``login`` from
  ``RATE_LIMIT_LOGIN``, ``register`` from ``RATE_LIMIT_REGISTER``, ``password_reset`` from
  ``RATE_LIMIT_PASSWORD_RESET``, ``model`` from ``RATE_LIMIT_MODEL``; a value of ``None`` is no
  limit.

Defaults: ``config/settings.py`` holds them, beside the environment read they default, and only
there; this module has none, so a key missing from ``GATEHOUSE`` is an error rather than a second
default that could drift from the first.

This module imports no app of ours: every layer may read settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

T = TypeVar("T")


def _wrong(name: str, expected: str, value: object) -> ImproperlyConfigured:
    # The type only, never the value: some of these are secrets.
    return ImproperlyConfigured(f"GATEHOUSE[{name!r}] must be {expected}, not {type(value).__name__}.")


def _int(name: str, value: object) -> int:
    # bool is an int to Python, but True seconds is a mistake.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _wrong(name, "an integer", value)


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise _wrong(name, "True or False", value)


def _str(name: str, value: object) -> str:
    if isinstance(value, str):
        return value
    raise _wrong(name, "a string", value)


def _optional_str(name: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _wrong(name, "a string or None", value)


def _str_list(name: str, value: object) -> tuple[str, ...]:
    # A bare string is a sequence of strings too, and would be read one character at a time.
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise _wrong(name, "a list of strings", value)


def _rates(name: str, value: object) -> Mapping[str, str | None]:
    if isinstance(value, dict) and all(
        isinstance(scope, str) and (rate is None or isinstance(rate, str)) for scope, rate in value.items()
    ):
        return value
    raise _wrong(name, "a dict of rate-limit scopes to rates (or None)", value)


# Checked values by key, until GATEHOUSE changes.
_checked: dict[str, object] = {}


def _forget(*, setting: str, **kwargs: object) -> None:
    if setting == "GATEHOUSE":
        _checked.clear()


setting_changed.connect(_forget)


class _Setting(Generic[T]):
    """One key of ``settings.GATEHOUSE``, read and checked at its first use after a change."""

    def __init__(self, check: Callable[[str, object], T]) -> None:
        self._check = check
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type | None = None) -> T:
        try:
            return _checked[self.name]  # type: ignore[return-value]
        except KeyError:
            pass
        try:
            value = settings.GATEHOUSE[self.name]
        except KeyError:
            raise ImproperlyConfigured(f"settings.GATEHOUSE has no {self.name!r}.") from None
        checked = _checked[self.name] = self._check(self.name, value)
        return checked


class GatehouseSettings:
    """``settings.GATEHOUSE``, one typed attribute per key; the comments in config/settings.py say
    what each one does."""

    # The MCP endpoint (mcp_gateway)
    GATEHOUSE_TOOLSETS = _Setting(_str_list)
    MCP_SESSION_IDLE_SECONDS = _Setting(_int)
    MCP_SESSION_RETENTION_SECONDS = _Setting(_int)
    MCP_SESSION_PURGE_INTERVAL_SECONDS = _Setting(_int)
    MCP_STREAMS_PER_PERSON = _Setting(_int)
    MCP_SESSIONS_PER_PERSON = _Setting(_int)
    MCP_TOOLSET_CACHE_SECONDS = _Setting(_int)
    MCP_IDENTITY_CACHE_SECONDS = _Setting(_int)
    MCP_DB_POOL_SIZE = _Setting(_int)
    MCP_CLIENT_INFO_MAX_BYTES = _Setting(_int)
    MCP_CLIENT_CAPABILITIES_MAX_BYTES = _Setting(_int)
    # Upstream MCP servers (upstreams)
    UPSTREAM_POOL_SIZE = _Setting(_int)
    UPSTREAM_IDLE_SECONDS = _Setting(_int)
    UPSTREAM_FLOOD_COOLDOWN_SECONDS = _Setting(_int)
    UPSTREAM_LIST_CACHE_SECONDS = _Setting(_int)
    UPSTREAM_PRIVATE_NETWORKS = _Setting(_str_list)
    # Jobs (jobs)
    JOBS_STEP_LEASE_SECONDS = _Setting(_int)
    JOBS_TOOL_TASK_QUEUE = _Setting(_str)
    RESEARCH_SOURCES = _Setting(_str_list)
    RESEARCH_OPENALEX_URL = _Setting(_str)
    RESEARCH_CROSSREF_URL = _Setting(_str)
    RESEARCH_ARXIV_URL = _Setting(_str)
    RESEARCH_HTTP_TIMEOUT_SECONDS = _Setting(_int)
    RESEARCH_CONTACT_EMAIL = _Setting(_optional_str)
    # OAuth (oauth)
    OAUTH_REFRESH_GRACE_SECONDS = _Setting(_int)
    OAUTH_UNUSED_CLIENT_DAYS = _Setting(_int)
    OAUTH_REGISTRATION_MAX_BODY_BYTES = _Setting(_int)
    OAUTH_CLIENT_MAX_REDIRECT_URIS = _Setting(_int)
    OAUTH_CLIENT_MAX_REDIRECT_URI_LENGTH = _Setting(_int)
    OAUTH_CLIENT_MAX_NAME_LENGTH = _Setting(_int)
    OAUTH_CLIENT_MAX_METADATA_STRING_LENGTH = _Setting(_int)
    OAUTH_PRIVATE_USE_SCHEMES = _Setting(_str_list)
    CIMD_ALLOW_LOOPBACK = _Setting(_bool)
    CIMD_CA_BUNDLE = _Setting(_optional_str)
    # Diagnostics, audit, requests, metrics (core)
    GATEHOUSE_COUNT_QUERIES = _Setting(_bool)
    GATEHOUSE_AUDIT = _Setting(_bool)
    AUDIT_RETENTION_DAYS = _Setting(_int)
    AUDIT_SPOOL_DIR = _Setting(_str)
    AUDIT_REFUSAL_WINDOW_SECONDS = _Setting(_int)
    TRUSTED_PROXY_COUNT = _Setting(_int)
    ACCESS_LOG = _Setting(_bool)
    GC_GEN0_THRESHOLD = _Setting(_int)
    METRICS_TOKEN = _Setting(_optional_str)
    METRICS_ALLOWED_NETWORKS = _Setting(_str_list)
    # Rate limits (core.ratelimit.limits)
    RATE_LIMIT_STORAGE_URL = _Setting(_str)
    RATE_LIMIT_KEY_PREFIX = _Setting(_str)
    RATE_LIMIT_RULE_CACHE_SECONDS = _Setting(_int)
    RATE_LIMITS = _Setting(_rates)
    RATE_LIMIT_LOGIN_FALLBACK = _Setting(_optional_str)
    RATE_LIMIT_LEASE_SIZE = _Setting(_int)
    RATE_LIMIT_LEASE_MS = _Setting(_int)
    # Stored credentials (core.crypto)
    DATA_SOURCE_ENCRYPTION_KEY = _Setting(_optional_str)
    # Toolsets (language_models, data_agent)
    LLM_MOCK_RESPONSES_FILE = _Setting(_optional_str)
    LLM_MAX_RETRIES = _Setting(_int)
    LLM_CONNECT_TIMEOUT_SECONDS = _Setting(_int)
    DATA_AGENT_QUESTION_TIMEOUT_SECONDS = _Setting(_int)
    DATA_AGENT_QUERY_TIMEOUT_SECONDS = _Setting(_int)
    DATA_AGENT_CONCURRENT_QUERIES_PER_PERSON = _Setting(_int)
    DATA_AGENT_CONCURRENT_QUERIES_PER_TENANT = _Setting(_int)
    DATA_AGENT_QUERY_WORKERS_PER_SOURCE = _Setting(_int)
    DATA_AGENT_POOL_SIZE_PER_SOURCE = _Setting(_int)
    DATA_AGENT_POOL_IDLE_SECONDS = _Setting(_int)
    DATA_AGENT_CATALOGUE_CACHE_SIZE = _Setting(_int)

    @classmethod
    def names(cls) -> frozenset[str]:
        """Every key this class reads, for checking it against ``settings.GATEHOUSE``."""
        return frozenset(name for name, value in vars(cls).items() if isinstance(value, _Setting))


gatehouse_settings = GatehouseSettings()
