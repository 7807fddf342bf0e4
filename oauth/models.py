"""DOT's grant and token models, swapped so that each one belongs to exactly one tenant.

The tenant is chosen on the consent page, stored on the grant, copied to the access and refresh
tokens minted from it, and carried along each refresh rotation (oauth.validators).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from oauth2_provider.models import AbstractAccessToken, AbstractGrant, AbstractRefreshToken

from accounts.models import Tenant, User
from oauth.redirect_patterns import redirect_pattern_validate


class Grant(AbstractGrant):
    # ``code`` holds the SHA-256 of the code, never the code (oauth.token_storage).
    tenant: models.ForeignKey[Tenant, Tenant] = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="+"
    )

    class Meta(AbstractGrant.Meta):
        swappable = "OAUTH2_PROVIDER_GRANT_MODEL"


class UsedAuthorizationCode(models.Model):
    """An authorization code already exchanged, kept by its checksum with the token family it
    produced, so that presenting it again revokes that family (RFC 6749 4.1.2). DOT deletes the
    grant once used; this row outlives it until ``remember_until`` (``oauth.code_replay``)."""

    code_checksum = models.CharField(max_length=64, unique=True)
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="+")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    # Null only if the exchange issued no refresh token; then the access token is the family.
    token_family = models.UUIDField(null=True, blank=True)
    access_token_checksum = models.CharField(max_length=64, blank=True)
    used = models.DateTimeField(auto_now_add=True)
    remember_until = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"Used code #{self.pk}"


class AccessToken(AbstractAccessToken):
    # Null only for DOT's RFC 7592 registration-management tokens, which belong to no user.
    tenant: models.ForeignKey[Tenant | None, Tenant | None] = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="+", null=True, blank=True
    )

    class Meta(AbstractAccessToken.Meta):
        swappable = "OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL"


class RefreshToken(AbstractRefreshToken):
    tenant: models.ForeignKey[Tenant, Tenant] = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="+"
    )

    class Meta(AbstractRefreshToken.Meta):
        swappable = "OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL"


class RedirectUriPattern(models.Model):
    """A redirect URI pattern an operator allows for registered clients (oauth.redirect_patterns), such as
    a provider's per-connector callback path: ``https://chatgpt.com/connector/oauth/*``."""

    pattern = models.CharField(
        max_length=500,
        validators=[redirect_pattern_validate],
        help_text="A redirect URI; each path segment written * matches one segment of letters, digits, "
        "'.', '_', '~' or '-'. No query, fragment or host wildcard.",
    )
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Only this client. Empty: every manually or dynamically registered client that "
        "registered a redirect URI on the pattern's origin.",
    )
    note = models.CharField(max_length=200, blank=True, help_text="Why this pattern exists.")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("pattern",)
        verbose_name = "redirect URI pattern"

    def __str__(self) -> str:
        return self.pattern


class RememberedConsent(models.Model):
    """A person's standing yes to one client in one tenant, so the next authorization asking for
    no more than this skips the consent page (``oauth.consent``)."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="remembered_consents")
    application = models.ForeignKey(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    scopes = models.CharField(max_length=500, help_text="Sorted, space-separated scopes the person allowed.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        # Created under accounts (accounts.0002); moved here by state only (oauth.0005).
        db_table = "accounts_rememberedconsent"
        ordering = ["-updated"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "application", "tenant"], name="remembered_consent_unique_user_client_tenant"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.application_id} in {self.tenant} ({self.scopes})"


class ServiceClient(models.Model):
    """A tenant's server-side application: a confidential OAuth client that takes tokens with the
    client-credentials grant, for the REST API only, bound to one tenant and role.

    Its tokens act as ``account``, a user of its own that cannot sign in (no usable password) and is
    a member of ``tenant`` with the client's role, so a token resolves, is rate limited, budgeted
    and audited exactly as a person's is; removing the membership or deactivating the account or
    tenant stops its next request (``oauth.service_clients``).
    """

    application = models.OneToOneField(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="service_client"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="service_clients")
    account = models.OneToOneField(User, on_delete=models.CASCADE, related_name="service_client")
    created_by = models.ForeignKey(User, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "application__name"]

    def __str__(self) -> str:
        return f"{self.application} in {self.tenant}"


class IdentityAssertionUse(models.Model):
    """An identity assertion (ID-JAG) already exchanged: its ``jti``, per issuing provider, kept until
    the assertion expires, so that each is exchanged once (``oauth.identity_assertion``)."""

    provider = models.ForeignKey("accounts.IdentityProvider", on_delete=models.CASCADE, related_name="+")
    jti = models.CharField(max_length=255)
    expires = models.DateTimeField(db_index=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "jti"], name="identity_assertion_use_once"),
        ]

    def __str__(self) -> str:
        return f"{self.jti} (provider {self.provider_id})"
