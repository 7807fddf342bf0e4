"""A tenant's other MCP servers, served behind Gatehouse (``upstreams``).

Gatehouse connects to each with its own credentials, never the caller's token: none, a static
header whose value is stored Fernet-encrypted only, or OAuth client credentials against the
upstream's authorization server (the secret encrypted too). A stdio upstream is a command this
machine runs, so only operators (superusers, and the command line) may configure one.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from accounts.models import Tenant
from accounts.scopes import SCOPE_READ

NAME_HELP = (
    "A short slug, unique in the tenant (letters, digits, hyphens). With prefix tools on, tool and "
    "prompt names become <name>_<tool>."
)
SCOPES_HELP = "The scopes a caller's token needs to see and use this upstream (mcp:write for writers only)."
INCLUDE_HELP = "Only these tools (the upstream's own names). Empty: all of them."
EXCLUDE_HELP = "Never these tools (the upstream's own names)."
PASS_IDENTITY_HELP = (
    "Send the caller's username and tenant as X-Gatehouse-User and X-Gatehouse-Tenant headers "
    "(http and sse only). Never the caller's token."
)


def default_scopes() -> list[str]:
    return [SCOPE_READ]


class Transport(models.TextChoices):
    HTTP = "http", "Streamable HTTP"
    SSE = "sse", "SSE (legacy)"
    STDIO = "stdio", "stdio (a command on this machine)"
    OPENAPI = "openapi", "OpenAPI (a REST API's operations as tools)"


class UpstreamProtocol(models.TextChoices):
    AUTO = "auto", "Newest (2026-07-28 when the server speaks it)"
    # For servers that speak both eras but whose tools ask for input in the middle of a call, or
    # announce list changes: only the handshake's session carries those.
    HANDSHAKE = "handshake", "Handshake (2025-11-25 and earlier, with a session)"


PROTOCOL_HELP = (
    "Newest: 2026-07-28 when the server speaks it. Handshake: always the initialize handshake "
    "(2025-11-25 and earlier), for a server whose tools ask for input (elicitation, sampling) in "
    "the middle of a call or which announces list changes: 2026-07-28 carries neither."
)


class AuthKind(models.TextChoices):
    NONE = "none", "None"
    HEADER = "header", "Static header"
    OAUTH = "oauth", "OAuth client credentials"
    # OpenAPI upstreams: an API key sent as a query parameter (header_name names the parameter).
    QUERY = "query", "API key in the query"
    # A tenant admin signs in to the upstream's authorization server once (authorization code with
    # PKCE); Gatehouse keeps the tokens it was given, encrypted, and refreshes them.
    OAUTH_CODE = "oauth_code", "OAuth sign-in (authorization code)"


class Upstream(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="upstreams")
    name = models.SlugField(max_length=40, help_text=NAME_HELP)
    transport = models.CharField(max_length=8, choices=Transport.choices, default=Transport.HTTP)
    protocol = models.CharField(
        max_length=10,
        choices=UpstreamProtocol.choices,
        default=UpstreamProtocol.AUTO,
        help_text=PROTOCOL_HELP,
    )
    url = models.CharField(max_length=2000, blank=True, verbose_name="URL", help_text="http and sse only.")
    # stdio only: the command, its arguments, its environment (encrypted: it may hold keys) and
    # its working directory.
    command = models.CharField(max_length=1000, blank=True)
    args = models.JSONField(default=list, blank=True)
    env_encrypted = models.TextField(blank=True, editable=False)
    cwd = models.CharField(max_length=1000, blank=True, verbose_name="working directory")
    connect_timeout_seconds = models.FloatField(
        default=10, validators=[MinValueValidator(0.1), MaxValueValidator(120)]
    )
    call_timeout_seconds = models.FloatField(
        default=60, validators=[MinValueValidator(0.1), MaxValueValidator(3600)]
    )
    include_tools = models.JSONField(default=list, blank=True, help_text=INCLUDE_HELP)
    exclude_tools = models.JSONField(default=list, blank=True, help_text=EXCLUDE_HELP)
    prefix_tools = models.BooleanField(default=False)
    scopes = models.JSONField(default=default_scopes, help_text=SCOPES_HELP)
    enabled = models.BooleanField(default=True)
    auth = models.CharField(max_length=12, choices=AuthKind.choices, default=AuthKind.NONE)
    header_name = models.CharField(max_length=200, blank=True)
    header_value_encrypted = models.TextField(blank=True, editable=False)
    oauth_client_id = models.CharField(max_length=500, blank=True, verbose_name="OAuth client id")
    oauth_client_secret_encrypted = models.TextField(blank=True, editable=False)
    oauth_scope = models.CharField(max_length=1000, blank=True, verbose_name="OAuth scope")
    pass_identity = models.BooleanField(default=False, help_text=PASS_IDENTITY_HELP)
    # OpenAPI upstreams: where the document was fetched from (blank when it was uploaded), the
    # document itself as validated, and the tools generated from its operations at save time (what
    # the catalog publishes and a call follows, without parsing the document again).
    openapi_url = models.CharField(max_length=2000, blank=True, verbose_name="OpenAPI document URL")
    openapi_document = models.JSONField(null=True, blank=True, editable=False)
    openapi_tools = models.JSONField(default=list, blank=True, editable=False)
    # The tool names (as published) found by the last successful test: what a collision with a
    # new upstream is checked against.
    tool_names = models.JSONField(default=list, blank=True, editable=False)
    last_tested = models.DateTimeField(null=True, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "name"]
        verbose_name = "upstream MCP server"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="upstream_name_unique"),
            models.CheckConstraint(
                condition=models.Q(transport__in=[t.value for t in Transport]),
                name="upstream_transport_known",
            ),
            models.CheckConstraint(
                condition=models.Q(auth__in=[a.value for a in AuthKind]), name="upstream_auth_known"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


# The OAuth sign-in kept for an upstream (upstreams.sign_in).
from upstreams.sign_in.models import UpstreamGrant  # noqa: E402, F401
