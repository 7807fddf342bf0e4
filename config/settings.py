"""Gatehouse settings. Everything deployment-specific is read from the environment (core.env)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import csp.constants as _csp
import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.log_format import PLAIN_FORMAT, env_log_format
from config.security import secret_key_validate
from core.env import (
    development_secret_key,
    env_bool,
    env_fernet_key,
    env_int,
    env_list,
    env_optional,
    env_origin,
    env_origin_list,
    env_rate,
    env_str,
    env_uri_schemes,
)
from core.loopback import is_loopback_host

# litellm otherwise fetches its model cost map from GitHub when it is imported, and waits on it
# where there is no internet (CI, closed networks); the copy it ships with is enough for us.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_DIR = BASE_DIR / ".local"

DEBUG = env_bool("DEBUG", default=False)

# The one canonical public origin. It is the OAuth issuer and the base of the MCP resource
# identifier, so a TLS-terminating proxy or a load balancer in front of several processes
# changes nothing: nothing is derived from the Host header of a request.
PORT = env_int("PORT", default=8000, minimum=1)
PUBLIC_URL = env_origin("PUBLIC_URL", default=f"http://127.0.0.1:{PORT}")
MCP_PATH = "/mcp"
MCP_RESOURCE_URL = f"{PUBLIC_URL}{MCP_PATH}"
# The REST API is a protected resource of its own: a token bound to /mcp does not open it.
API_PATH = "/api"
API_RESOURCE_URL = f"{PUBLIC_URL}{API_PATH}"
_public = urlsplit(PUBLIC_URL)
_public_host = _public.hostname or ""
_public_netloc = _public.netloc

# `make run` generates a development key into the git-ignored .local/ folder. It is found here too,
# so that `manage.py createsuperuser` and the other documented commands work without the Makefile,
# but only for a development setup: a plain-http loopback PUBLIC_URL (unset is loopback). Anything
# else (https, a public host) still refuses to start without a real SECRET_KEY.
DEVELOPMENT_SECRET_KEY_FILE = LOCAL_DIR / "secret_key"
# Where `make run` keeps the demo people's password (portal.run_prepare), to print it on every start.
DEMO_PASSWORD_KEPT_FILE = LOCAL_DIR / "demo_password"
_secret = env_optional("SECRET_KEY")
if _secret is None:
    _secret = development_secret_key(
        path=DEVELOPMENT_SECRET_KEY_FILE,
        development=_public.scheme == "http" and is_loopback_host(_public_host, allow_localhost_name=True),
    )
if _secret is None:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) is required unless DEBUG=true.")
    _secret = "insecure-debug-only-key-never-used-in-production"
SECRET_KEY = _secret

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=[_public_host, "127.0.0.1", "localhost"])
if _public_host not in ALLOWED_HOSTS:
    ALLOWED_HOSTS.append(_public_host)
CSRF_TRUSTED_ORIGINS = [PUBLIC_URL]

# Browser clients on other origins (the MCP Inspector, a web app), through django-cors-headers:
# one policy for the OAuth endpoints a client fetches and, by core.cors, for /mcp, whose Origin
# check asks the same question. Allowed: PUBLIC_URL and the operator's MCP_ALLOWED_ORIGINS (and,
# on a loopback PUBLIC_URL, any loopback origin: core.cors); discovery documents, which are public,
# from any origin. The REST API too (bearer tokens, as /mcp): a page on an allowed origin may call
# it, and every origin's preflight gets an answer (with the headers only for an allowed one)
# rather than the API's 405. Never on the login, consent or admin pages: a browser navigates there.
CORS_ALLOWED_ORIGINS = [PUBLIC_URL, *env_origin_list("MCP_ALLOWED_ORIGINS", default=[])]
PUBLIC_DOCUMENT_URLS_REGEX = r"^/(?:.+/)?\.well-known/"
CORS_URLS_REGEX = rf"^/(?:mcp/?$|api/v1/|oauth/(?:token|revoke|register)/)|{PUBLIC_DOCUMENT_URLS_REGEX}"
# Bearer tokens, never cookies: no answer allows credentials, which is also what lets "*" below
# stand for any request header (Fetch), as the Mcp-Param-<Name> headers a tool's schema names
# must; Authorization is the one header "*" does not cover, so it is named.
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_HEADERS = [
    "accept",
    "authorization",
    "content-type",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "*",
]
# PUT: a client updating its own registration (RFC 7592); DELETE: that, or ending an MCP session.
CORS_ALLOW_METHODS = ["DELETE", "GET", "OPTIONS", "POST", "PUT"]
# What a page may read beyond the safelisted headers: the session id to send back, the protocol
# version, the challenge of a 401 (naming the metadata to discover from), when to retry, and the
# request id to quote in a bug report.
CORS_EXPOSE_HEADERS = [
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "WWW-Authenticate",
    "Retry-After",
    "X-Request-Id",
]

INSTALLED_APPS = [
    "daphne",
    # Django's admin under Gatehouse's name, the OAuth models in one section (config/admin_site.py).
    "config.admin_site.GatehouseAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
    # CORS for browser clients (CORS_* below; core.cors).
    "corsheaders",
    # The REST API's library; installed so its docs page serves the Swagger UI it ships, never a CDN's.
    "ninja",
    "core",
    "accounts",
    "oauth",
    "mcp_gateway",
    "conversations",
    "data_agent",
    "language_models",
    # A tenant's workflow of commands (contexts, commands, YAML import/export).
    "workflows",
    # One governed REST API and MCP tool for a tenant's language models.
    "llm_gateway",
    "upstreams",
    # Long work on a task queue that waits for a person's decisions (django-tasks, database backend).
    "django_tasks",
    "django_tasks_db",
    "jobs",
    "research",
    # The fixtures the MCP conformance suites call, a toolset a tenant may turn on.
    "conformance_fixtures",
    "portal",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every response (CONTENT_SECURITY_POLICY below).
    "core.csp.ContentSecurityPolicyMiddleware",
    # Before anything that answers on its own (WhiteNoise, CommonMiddleware), so a preflight is
    # answered here; after the two above, so that answer carries their headers too.
    "corsheaders.middleware.CorsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Before any view reads an OAuth parameter: NUL or invalid UTF-8 is a 400, not a 500.
    "oauth.parameter_guard.OAuthParameterGuardMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, so a view's GatehouseError reaches it first (core.http_errors).
    "core.http_errors.GatehouseErrorMiddleware",
]

# A strict Content-Security-Policy (django-csp; Django 5.2 has none of its own): only our own
# scripts, styles (inline ones by nonce: templates/base.html) and images; no plugins, no framing, no
# <base>; forms post to us only, plus the client's registered redirect URI on the pages of an
# authorization request (core.csp). JSON answers carry it too, harmlessly.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [_csp.NONE],
        "script-src": [_csp.SELF],
        "style-src": [_csp.SELF, _csp.NONCE],
        "img-src": [_csp.SELF, "data:"],
        "font-src": [_csp.SELF],
        "connect-src": [_csp.SELF],
        "form-action": [_csp.SELF],
        "frame-ancestors": [_csp.NONE],
        "base-uri": [_csp.NONE],
        "object-src": [_csp.NONE],
    },
}

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Each silenced check says why where it is added.
SILENCED_SYSTEM_CHECKS: list[str] = []

# Without DATABASE_URL the product runs on an embedded SQLite file, so `make run` needs no
# database server; the test suite always runs on PostgreSQL.
_database_url = env_optional("DATABASE_URL")
if _database_url is None:
    LOCAL_DIR.mkdir(exist_ok=True)
    DATABASES = {"default": dj_database_url.parse(f"sqlite:///{LOCAL_DIR / 'gatehouse.sqlite3'}")}
else:
    # Persistent connections, health-checked before reuse, for Django's own queries (pages, admin,
    # and the MCP endpoint's db_call): reconnecting per query would dominate their latency. The
    # endpoint's per-request token lookup has its own async pool (core.db).
    try:
        DATABASES = {
            "default": dj_database_url.parse(
                _database_url,
                conn_max_age=env_int("DB_CONN_MAX_AGE", default=60, minimum=0),
                conn_health_checks=True,
            )
        }
    except ValueError as exc:  # dj_database_url's ParseError and UnknownSchemeError
        raise ImproperlyConfigured(
            f"DATABASE_URL is not a database URL ({type(exc).__name__}); "
            "write it as postgres://USER:PASSWORD@HOST:5432/NAME."
        ) from None
    # Another backend would fail later, with a traceback about its missing driver.
    if DATABASES["default"]["ENGINE"] not in {"django.db.backends.postgresql", "django.db.backends.sqlite3"}:
        raise ImproperlyConfigured("DATABASE_URL must name a PostgreSQL database (postgres://...) or SQLite.")
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Daphne runs each request's view in a thread of its own, on a connection of its own. In SQLite's
    # default (DEFERRED) mode a transaction that reads and then writes (a token refresh, a consent)
    # fails at once with "database is locked" while another holds the write lock, without waiting:
    # IMMEDIATE takes the lock at BEGIN, where the busy timeout applies; a burst of writers queues
    # (a client registration holds it about a second, hashing the client secret), hence 60 s. WAL:
    # readers never wait for a writer.
    for _option, _value in {
        "transaction_mode": "IMMEDIATE",
        "timeout": 60,
        "init_command": "PRAGMA journal_mode=WAL",
    }.items():
        DATABASES["default"].setdefault("OPTIONS", {}).setdefault(_option, _value)
    # SQLite cannot enforce RateLimitRule's one-rule-per-(scope, target, tenant) constraint when the
    # tenant is blank; the admin form still checks it, and PostgreSQL enforces it.
    SILENCED_SYSTEM_CHECKS.append("models.W047")

# Django's tasks API (the django-tasks backport): job steps (jobs.steps) are rows in this same
# database, taken by `manage.py jobs_worker` processes.
# QUEUES empty: any queue name, since a job kind may send its steps to a queue of its own
# (jobs.kinds), for workers started with `jobs_worker --queue-name`.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": []}}

_redis_url = env_optional("REDIS_URL")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
LOGIN_URL = "login"
# People who sign in without an OAuth request land on their connected applications; the admin's
# own sign-in sends operators back to /admin/ with ``next``.
LOGIN_REDIRECT_URL = "accounts:connected"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Email (password reset links, portal.password_reset), through Django's own backends: SMTP when
# EMAIL_HOST names a mail server; without one, on a loopback PUBLIC_URL (`make run`), each message
# is printed on the console, and anywhere else it goes to Django's default, an SMTP server on
# localhost:25. EMAIL_BACKEND overrides the choice (the end-to-end servers write files:
# django.core.mail.backends.filebased.EmailBackend with EMAIL_FILE_PATH).
_email_host = env_optional("EMAIL_HOST")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    default="django.core.mail.backends.console.EmailBackend"
    if _email_host is None and is_loopback_host(_public_host, allow_localhost_name=True)
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = _email_host or "localhost"
# A mail server named by EMAIL_HOST is another machine: STARTTLS on the submission port by default.
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=_email_host is not None)
EMAIL_PORT = env_int("EMAIL_PORT", default=587 if EMAIL_USE_TLS else 25, minimum=1)
EMAIL_HOST_USER = env_optional("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = env_optional("EMAIL_HOST_PASSWORD") or ""
if EMAIL_HOST_PASSWORD and not EMAIL_USE_TLS and not is_loopback_host(EMAIL_HOST, allow_localhost_name=True):
    raise ImproperlyConfigured(
        "EMAIL_HOST_PASSWORD would cross the network in clear: set EMAIL_USE_TLS=true."
    )
# Django waits for ever on a mail server that does not answer, holding the request's thread.
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", default=10, minimum=1)
EMAIL_FILE_PATH = env_optional("EMAIL_FILE_PATH")
if EMAIL_BACKEND == "django.core.mail.backends.filebased.EmailBackend" and EMAIL_FILE_PATH is None:
    raise ImproperlyConfigured("EMAIL_BACKEND writes files: set EMAIL_FILE_PATH to their directory.")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", default=f"Gatehouse <noreply@{_public_host}>")
# A reset link works once, and for this many seconds (Django's token generator).
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT", default=3600, minimum=60)
# A tenant admin's invitation link works once, and for this many days (accounts.invitations).
INVITATION_VALID_DAYS = env_int("INVITATION_VALID_DAYS", default=7, minimum=1)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = LOCAL_DIR / "staticfiles"

# Production is an https PUBLIC_URL behind a TLS-terminating proxy that sets X-Forwarded-Proto
# (platform/nginx.conf). Over plain http (development, tests) none of this applies: a Secure cookie
# would never come back, and HSTS would lock browsers out of the development host.
_https = _public.scheme == "https"
if _https and not DEBUG:
    secret_key_validate(key=SECRET_KEY)
SESSION_COOKIE_SECURE = _https
CSRF_COOKIE_SECURE = _https
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if _https else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", default=_https)
# Load-balancer health checks and Prometheus scrapes reach the process directly, over plain http.
SECURE_REDIRECT_EXEMPT = [r"^health$", r"^health/ready$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if _https else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=_https)
# Preloading is the domain owner's decision (it names the registrable domain and is slow to undo),
# so it is off unless asked for; its deploy warning is silenced only while it is off.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", default=False)
if not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS.append("security.W021")
# DOT warns that "http" redirect URIs are allowed; Gatehouse allows them only to loopback hosts
# (RFC 8252 native clients) and refuses any other at every authorization request (oauth.redirects).
SILENCED_SYSTEM_CHECKS.append("oauth2_provider.W008")

# Swapped DOT token models: each grant and token carries the tenant it was issued for.
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER_ID_TOKEN_MODEL = "oauth2_provider.IDToken"
OAUTH2_PROVIDER_GRANT_MODEL = "oauth.Grant"
OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL = "oauth.AccessToken"
OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL = "oauth.RefreshToken"

# Client ID metadata documents served from this machine: for development only, so refused unless
# Gatehouse itself is served on loopback; a deployment can never be talked into fetching from its
# own host (oauth.cimd).
_cimd_allow_loopback = env_bool("CIMD_ALLOW_LOOPBACK", default=False)
if _cimd_allow_loopback and not is_loopback_host(_public_host, allow_localhost_name=True):
    raise ImproperlyConfigured("CIMD_ALLOW_LOOPBACK=true needs a loopback PUBLIC_URL (development only).")

# Scripted LLM answers (language_models.scripted) are for tests: refused unless Gatehouse is
# served on loopback, so no deployment can answer its people from a file.
_llm_mock_responses_file = env_optional("LLM_MOCK_RESPONSES_FILE")
if _llm_mock_responses_file and not is_loopback_host(_public_host, allow_localhost_name=True):
    raise ImproperlyConfigured("LLM_MOCK_RESPONSES_FILE is for tests: it needs a loopback PUBLIC_URL.")

OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "oauth.validators.TenantOAuth2Validator",
    "SCOPES_BACKEND_CLASS": "accounts.scopes.RoleScopesBackend",
    # Endpoints and the issuer are built from PUBLIC_URL, never from the request's Host.
    "OIDC_ISS_ENDPOINT": PUBLIC_URL,
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    # Bearer tokens only in the Authorization header, never in a URL that proxies and logs keep.
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": env_int("OAUTH_CODE_SECONDS", default=600, minimum=1),
    "ACCESS_TOKEN_EXPIRE_SECONDS": env_int("OAUTH_ACCESS_TOKEN_SECONDS", default=900, minimum=1),
    "REFRESH_TOKEN_EXPIRE_SECONDS": env_int(
        "OAUTH_REFRESH_TOKEN_SECONDS", default=30 * 24 * 3600, minimum=60
    ),
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # Tokens at rest are SHA-256 checksums only. DOT's own refresh grace period would replay the
    # previous pair from plaintext, so it stays 0; GATEHOUSE's OAUTH_REFRESH_GRACE_SECONDS replaces it
    # (oauth.token_storage).
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": [
        "authorization_code",
        "refresh_token",
        "client_credentials",
        # Identity assertions (ID-JAG) of a tenant's identity provider (oauth.identity_assertion).
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
    ],
    "OAUTH2_SERVER_CLASS": "oauth.identity_assertion.server.GatehouseServer",
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_post", "client_secret_basic"],
    # MCP clients such as Claude register anonymously (RFC 7591) or present a client ID
    # metadata document; both are open, and consent is what protects the user.
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    # DOT's SSRF-hardened fetch with our address policy and trust roots; its limits, stated here.
    "CIMD_METADATA_FETCHER": "oauth.cimd.GatehouseMetadataFetcher",
    "CIMD_FETCH_TIMEOUT_SECONDS": 5,
    "CIMD_MAX_DOCUMENT_SIZE": 16 * 1024,
    "CIMD_METADATA_MIN_AGE_SECONDS": 300,
    "CIMD_METADATA_MAX_AGE_SECONDS": 24 * 3600,
    "CIMD_FAILURE_BACKOFF_SECONDS": 60,
    "OAUTH2_PROTECTED_RESOURCE_IDENTIFIER": MCP_RESOURCE_URL,
    "OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS": [PUBLIC_URL],
    "OAUTH2_PROTECTED_RESOURCE_NAME": "Gatehouse MCP",
}

# App settings, namespaced in one dict. Each key is named after the environment variable it comes
# from, so one name follows a setting from the deployment to the code, and its default here is its
# only one. Code reads them typed, at call time, through core.conf (never GATEHOUSE["..."]).
GATEHOUSE: dict[str, Any] = {
    "GATEHOUSE_TOOLSETS": env_list(
        "GATEHOUSE_TOOLSETS",
        default=[
            "mcp_gateway.toolsets.account",
            "conformance_fixtures.toolset",
            "conformance_fixtures.dynamic",
            "data_agent.toolset",
            "workflows.toolset",
            "llm_gateway.toolset",
            "upstreams.toolset",
            "research.toolset",
        ],
    ),
    # An MCP session idle this long answers 404 and the client initializes a new one.
    "MCP_SESSION_IDLE_SECONDS": env_int("MCP_SESSION_IDLE_SECONDS", default=3600, minimum=1),
    # Ended sessions stay visible to operators this long before the purge deletes them.
    "MCP_SESSION_RETENTION_SECONDS": env_int(
        "MCP_SESSION_RETENTION_SECONDS", default=7 * 24 * 3600, minimum=0
    ),
    # How often each server process runs the purge in the background (0 turns it off).
    "MCP_SESSION_PURGE_INTERVAL_SECONDS": env_int(
        "MCP_SESSION_PURGE_INTERVAL_SECONDS", default=600, minimum=0
    ),
    # Standalone GET /mcp streams one person may hold open on one server process; a further one is
    # refused with 429 (each holds a connection and a task for as long as it is open).
    "MCP_STREAMS_PER_PERSON": env_int("MCP_STREAMS_PER_PERSON", default=10, minimum=1),
    # Live (not ended, not idle) handshake-era sessions one person may hold, all clients together:
    # enough for every client a person runs, not for a script opening them in a loop.
    "MCP_SESSIONS_PER_PERSON": env_int("MCP_SESSIONS_PER_PERSON", default=50, minimum=1),
    # A rotated refresh token presented again this soon is a parallel or retried refresh (it gets a
    # new pair); later, it is a replay, and its whole token family is revoked.
    "OAUTH_REFRESH_GRACE_SECONDS": env_int("OAUTH_REFRESH_GRACE_SECONDS", default=30, minimum=0),
    # What an MCP client's initialize may leave in its session row, as JSON bytes each: its
    # clientInfo and its capabilities. Larger is refused with -32602.
    "MCP_CLIENT_INFO_MAX_BYTES": env_int("MCP_CLIENT_INFO_MAX_BYTES", default=16384, minimum=256),
    "MCP_CLIENT_CAPABILITIES_MAX_BYTES": env_int(
        "MCP_CLIENT_CAPABILITIES_MAX_BYTES", default=16384, minimum=256
    ),
    # How long each process keeps what a bearer token resolved to (mcp_gateway.kernel.identity_cache);
    # every change it depends on is forgotten at once by every process. 0: ask every time.
    "MCP_IDENTITY_CACHE_SECONDS": env_int("MCP_IDENTITY_CACHE_SECONDS", default=30, minimum=0),
    # How long each process trusts its copy of a tenant's enabled toolsets.
    "MCP_TOOLSET_CACHE_SECONDS": env_int("MCP_TOOLSET_CACHE_SECONDS", default=5, minimum=0),
    # Upstream MCP servers (upstreams): sessions each process keeps open per upstream (a call holds
    # one for its duration; more wait), how long an idle one is kept, and how long each process
    # trusts its copy of an upstream's lists (dropped at once on the upstream's list_changed).
    "UPSTREAM_POOL_SIZE": env_int("UPSTREAM_POOL_SIZE", default=8, minimum=1),
    "UPSTREAM_IDLE_SECONDS": env_int("UPSTREAM_IDLE_SECONDS", default=300, minimum=1),
    # How long a process opens no new session to an upstream whose flood of list_changed ended one
    # (upstreams.list_changes); 0 reconnects at the next call.
    "UPSTREAM_FLOOD_COOLDOWN_SECONDS": env_int("UPSTREAM_FLOOD_COOLDOWN_SECONDS", default=60, minimum=0),
    "UPSTREAM_LIST_CACHE_SECONDS": env_int("UPSTREAM_LIST_CACHE_SECONDS", default=30, minimum=0),
    # Private networks upstreams may connect to, besides public addresses (upstreams.egress): CIDR
    # networks such as 10.0.0.0/8,127.0.0.0/8, checked at every connection; empty, none. A value that
    # is not a network stops the server when it starts.
    "UPSTREAM_PRIVATE_NETWORKS": env_list("UPSTREAM_PRIVATE_NETWORKS", default=[]),
    # Jobs (jobs): a step whose worker has not renewed its claim for this long is taken to be lost
    # (the worker died) and is enqueued again; a live worker renews it every quarter of this.
    "JOBS_STEP_LEASE_SECONDS": env_int("JOBS_STEP_LEASE_SECONDS", default=30, minimum=1),
    # The task queue of MCP tool tasks' steps (jobs.tool_task_kind), so they can have workers of
    # their own (jobs_worker --queue-name); make run's worker takes every queue.
    "JOBS_TOOL_TASK_QUEUE": env_str("JOBS_TOOL_TASK_QUEUE", default="default"),
    # The literature search (research): the sources this deployment offers (a closed network keeps
    # only "library", the tenant's own BibTeX library).
    "RESEARCH_SOURCES": env_list("RESEARCH_SOURCES", default=["openalex", "crossref", "arxiv", "library"]),
    # Where the public sources answer (tests point them at tests/research/replay_server.py), how long
    # one request may take, and the address sent to OpenAlex's and Crossref's "polite pools" (unset:
    # none is sent, and those services may answer more slowly).
    "RESEARCH_OPENALEX_URL": env_str("RESEARCH_OPENALEX_URL", default="https://api.openalex.org"),
    "RESEARCH_CROSSREF_URL": env_str("RESEARCH_CROSSREF_URL", default="https://api.crossref.org"),
    "RESEARCH_ARXIV_URL": env_str("RESEARCH_ARXIV_URL", default="https://export.arxiv.org/api/query"),
    "RESEARCH_HTTP_TIMEOUT_SECONDS": env_int("RESEARCH_HTTP_TIMEOUT_SECONDS", default=15, minimum=1),
    "RESEARCH_CONTACT_EMAIL": env_optional("RESEARCH_CONTACT_EMAIL"),
    # Connections per worker for the query every MCP request makes (core.db).
    "MCP_DB_POOL_SIZE": env_int("MCP_DB_POOL_SIZE", default=4, minimum=1),
    # Diagnostics: count every SQL query this process runs and report the total when it exits.
    "GATEHOUSE_COUNT_QUERIES": env_bool("GATEHOUSE_COUNT_QUERIES", default=False),
    # Audit trail (core.audit.trail). Turning it off is for measuring its cost, not for production.
    "GATEHOUSE_AUDIT": env_bool("GATEHOUSE_AUDIT", default=True),
    "AUDIT_RETENTION_DAYS": env_int("AUDIT_RETENTION_DAYS", default=365, minimum=1),
    # Where audit rows the database could not take wait, one append-only file per process, until
    # they are replayed (core.audit.spool). Shared by the processes of one host; keep it on a disk
    # that survives a restart.
    "AUDIT_SPOOL_DIR": env_str("AUDIT_SPOOL_DIR", default=str(LOCAL_DIR / "audit-spool")),
    # Repeated refusals of one key (person, limit) are written as one row per this many seconds.
    "AUDIT_REFUSAL_WINDOW_SECONDS": env_int("AUDIT_REFUSAL_WINDOW_SECONDS", default=60, minimum=0),
    # OAuth clients (oauth.cimd, oauth.clients): see the comments above OAUTH2_PROVIDER.
    "CIMD_ALLOW_LOOPBACK": _cimd_allow_loopback,
    # Extra trust roots (a PEM file) for fetching metadata documents, besides the system's.
    "CIMD_CA_BUNDLE": env_optional("CIMD_CA_BUNDLE"),
    # `manage.py purge_unused_clients` deletes registered clients never used for this many days.
    "OAUTH_UNUSED_CLIENT_DAYS": env_int("OAUTH_UNUSED_CLIENT_DAYS", default=30, minimum=1),
    # Bounds on what a client may register (oauth.registration_policy): the request body, its
    # redirect URIs and its strings. client_name is stored in a 255-character column.
    "OAUTH_REGISTRATION_MAX_BODY_BYTES": env_int(
        "OAUTH_REGISTRATION_MAX_BODY_BYTES", default=64 * 1024, minimum=1024
    ),
    "OAUTH_CLIENT_MAX_REDIRECT_URIS": env_int("OAUTH_CLIENT_MAX_REDIRECT_URIS", default=10, minimum=1),
    "OAUTH_CLIENT_MAX_REDIRECT_URI_LENGTH": env_int(
        "OAUTH_CLIENT_MAX_REDIRECT_URI_LENGTH", default=2000, minimum=100
    ),
    "OAUTH_CLIENT_MAX_NAME_LENGTH": env_int("OAUTH_CLIENT_MAX_NAME_LENGTH", default=200, minimum=1),
    "OAUTH_CLIENT_MAX_METADATA_STRING_LENGTH": env_int(
        "OAUTH_CLIENT_MAX_METADATA_STRING_LENGTH", default=2000, minimum=100
    ),
    # Redirect URIs in a native app's own scheme (RFC 8252 §7.1), such as Cursor's
    # cursor://anysphere.cursor-mcp/oauth/callback: "*" allows any scheme core.uri_schemes does not
    # refuse (javascript, data, file, mailto, ms-... never), a list allows only those, "none" none.
    # Matched exactly at every authorization request; the code is bound to the client's PKCE.
    "OAUTH_PRIVATE_USE_SCHEMES": env_uri_schemes("OAUTH_PRIVATE_USE_SCHEMES", default=["*"]),
    # How many proxies (TLS terminator, load balancer) append to X-Forwarded-For in front of the
    # server; the client address is read that many entries from the right, never from the left.
    "TRUSTED_PROXY_COUNT": env_int("TRUSTED_PROXY_COUNT", default=0, minimum=0),
    # Rate limits (core.ratelimit.limits): shared by every worker through Redis; without REDIS_URL,
    # held in each process's memory (fine for the embedded single-process default only).
    "RATE_LIMIT_STORAGE_URL": env_str(
        "RATE_LIMIT_STORAGE_URL", default=_redis_url if _redis_url else "memory://"
    ),
    "RATE_LIMIT_KEY_PREFIX": env_str("RATE_LIMIT_KEY_PREFIX", default="gatehouse"),
    # How long each process trusts its copy of the operators' RateLimitRule rows.
    "RATE_LIMIT_RULE_CACHE_SECONDS": env_int("RATE_LIMIT_RULE_CACHE_SECONDS", default=5, minimum=0),
    # Defaults in the `limits` notation ("5/minute", "100/hour"); "none" turns a default off.
    # Operators override them per tool, resource and tenant in the admin (RateLimitRule).
    "RATE_LIMITS": {
        "tool": env_rate("RATE_LIMIT_TOOL", default="120/minute"),
        "tool_expensive": env_rate("RATE_LIMIT_TOOL_EXPENSIVE", default="5/minute"),
        "resource": env_rate("RATE_LIMIT_RESOURCE_READ", default="30/minute"),
        "authorize": env_rate("RATE_LIMIT_AUTHORIZE", default="10/minute"),
        "login": env_rate("RATE_LIMIT_LOGIN", default="5/minute"),
        "register": env_rate("RATE_LIMIT_REGISTER", default="10/hour"),
        # Per address and per email address asked for: each meets the limit alone.
        "password_reset": env_rate("RATE_LIMIT_PASSWORD_RESET", default="5/hour"),
        # Every model call of every feature (language_models.governed), per person and feature: an
        # ask_question makes up to six, so this leaves room for ten questions a minute.
        "model": env_rate("RATE_LIMIT_MODEL", default="60/minute"),
    },
    # While the shared storage (Redis) does not answer, each process counts alone
    # (core.ratelimit.fallback): sign-in is then held to this stricter per-process limit (or to its
    # own, if stricter still), since N processes would otherwise allow N times the guesses.
    "RATE_LIMIT_LOGIN_FALLBACK": env_rate("RATE_LIMIT_LOGIN_FALLBACK", default="2/minute"),
    # MCP calls on Redis far from their limit are counted through leases (core.ratelimit.leases): a
    # worker takes a few slots in one round trip and spends them for up to RATE_LIMIT_LEASE_MS. At
    # most this many are leased ahead (and at most an eighth of what is left); 0 counts every call
    # in Redis on its own.
    "RATE_LIMIT_LEASE_SIZE": env_int("RATE_LIMIT_LEASE_SIZE", default=16, minimum=0),
    "RATE_LIMIT_LEASE_MS": env_int("RATE_LIMIT_LEASE_MS", default=100, minimum=1),
    # Prometheus metrics at /metrics: open to these networks, or to anyone presenting the token.
    "METRICS_TOKEN": env_optional("METRICS_TOKEN"),
    "METRICS_ALLOWED_NETWORKS": env_list("METRICS_ALLOWED_NETWORKS", default=["127.0.0.1/32", "::1/128"]),
    # One line per HTTP request (method, path, status, duration, request id) at INFO.
    "ACCESS_LOG": env_bool("ACCESS_LOG", default=True),
    # core.gc_tuning: 0 leaves Python's collector as it is (no freeze, its own thresholds).
    "GC_GEN0_THRESHOLD": env_int("GC_GEN0_THRESHOLD", default=5000, minimum=0),
    # Fernet key for stored credentials: data source URLs and model API keys (core.crypto);
    # unset, one is derived from SECRET_KEY.
    "DATA_SOURCE_ENCRYPTION_KEY": env_fernet_key("DATA_SOURCE_ENCRYPTION_KEY"),
    # Tests only: a JSON script every language model call answers from, through litellm's own mock
    # (language_models.scripted). `manage.py check --deploy` reports it as an error.
    "LLM_MOCK_RESPONSES_FILE": _llm_mock_responses_file,
    # Every LLM call (language_models.completion): how often the provider's SDK retries a
    # connection failure, a rate limit or a 5xx (never a refused key or an unknown model), and how
    # long it waits to connect. Each model's own timeout (in the admin) bounds the call as a whole.
    "LLM_MAX_RETRIES": env_int("LLM_MAX_RETRIES", default=1, minimum=0),
    "LLM_CONNECT_TIMEOUT_SECONDS": env_int("LLM_CONNECT_TIMEOUT_SECONDS", default=10, minimum=1),
    # The whole of one ask_question run, waiting on the person for clarification included.
    "DATA_AGENT_QUESTION_TIMEOUT_SECONDS": env_int(
        "DATA_AGENT_QUESTION_TIMEOUT_SECONDS", default=300, minimum=1
    ),
    # Fair use of tenants' data sources (data_agent.query_pool, data_agent.query_slots): each query's
    # statement time limit; how many queries one person and one tenant may have running at once
    # (counted across processes in Redis when the rate-limit storage is Redis, else per process),
    # a query over either refused at once; and each process's threads per data source.
    "DATA_AGENT_QUERY_TIMEOUT_SECONDS": env_int("DATA_AGENT_QUERY_TIMEOUT_SECONDS", default=30, minimum=1),
    "DATA_AGENT_CONCURRENT_QUERIES_PER_PERSON": env_int(
        "DATA_AGENT_CONCURRENT_QUERIES_PER_PERSON", default=2, minimum=1
    ),
    "DATA_AGENT_CONCURRENT_QUERIES_PER_TENANT": env_int(
        "DATA_AGENT_CONCURRENT_QUERIES_PER_TENANT", default=6, minimum=1
    ),
    "DATA_AGENT_QUERY_WORKERS_PER_SOURCE": env_int(
        "DATA_AGENT_QUERY_WORKERS_PER_SOURCE", default=4, minimum=1
    ),
    # Each process's idle connections to one PostgreSQL data source, kept for its next query (0: a
    # connection per query), and how long one may stay idle (data_agent.source_connections); the
    # catalogues each process keeps, checked against the database on every call (data_agent.catalogue).
    "DATA_AGENT_POOL_SIZE_PER_SOURCE": env_int("DATA_AGENT_POOL_SIZE_PER_SOURCE", default=4, minimum=0),
    "DATA_AGENT_POOL_IDLE_SECONDS": env_int("DATA_AGENT_POOL_IDLE_SECONDS", default=60, minimum=1),
    "DATA_AGENT_CATALOGUE_CACHE_SIZE": env_int("DATA_AGENT_CATALOGUE_CACHE_SIZE", default=256, minimum=0),
}

# One JSON object per line (LOG_FORMAT=json, the default) or plain text (LOG_FORMAT=plain); every
# line carries the request id (config.log_format). Access lines go to the gatehouse.access logger.
LOGGING_CONFIG = "config.log_format.logging_configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "config.log_format.RequestIdFilter"}},
    "formatters": {
        "json": {"()": "config.log_format.JsonLogFormatter"},
        "plain": {"format": PLAIN_FORMAT},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": env_log_format("LOG_FORMAT", default="json"),
            "filters": ["request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "httpx": {"level": "WARNING"},
        # The SDK's HTTP client (upstream MCP servers) logs each request's URL at INFO, query
        # string included, where an upstream's URL may carry its key.
        "httpx2": {"level": "WARNING"},
        "LiteLLM": {"level": "WARNING"},
        # The SDK's client (upstream MCP servers) logs each session id it receives, and each stream
        # reconnection, at INFO: noise in the server's log, and JSON lines in an operator's
        # terminal when `manage.py upstreams add` connects.
        "mcp.client": {"level": "WARNING"},
        # The SDK logs every stateless transport's start and end at INFO.
        "mcp.server.streamable_http": {"level": "WARNING"},
        "mcp.server.streamable_http_manager": {"level": "WARNING"},
    },
}
