from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


# django-stubs cannot resolve DOT's "%(app_label)s_%(class)s" related names on the token models.
class User(AbstractUser):  # type: ignore[django-manager-missing]
    """The person who logs in. Custom from the first migration so it can grow without pain."""

    display_name = models.CharField(max_length=150, blank=True)


class Tenant(models.Model):
    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    is_active = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    ADMIN = "admin", "Admin"
    CONTRIBUTOR = "contributor", "Contributor"
    VIEWER = "viewer", "Viewer"


class Membership(models.Model):
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.VIEWER)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tenant__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique_user_tenant"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


ROLE_MAP_HELP = (
    "One line per value: the claim's value, '=', then admin, contributor or viewer (for example "
    "'gatehouse-admins = admin'). A person with several mapped values gets the highest role."
)


class IdentityProvider(models.Model):
    """A tenant's OpenID Connect provider: its people sign in through it (``accounts.sign_in``).

    Found by the issuer's discovery document; the client secret is stored Fernet-encrypted only.
    Each sign-in maps the person's claims to their role in the tenant anew.
    """

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="identity_provider")
    name = models.CharField(max_length=100, help_text="Shown as 'Sign in with <name>'.")
    issuer = models.URLField(
        max_length=500,
        help_text="The provider's issuer URL; discovery is at <issuer>/.well-known/openid-configuration.",
    )
    client_id = models.CharField(max_length=255)
    client_secret_encrypted = models.TextField(blank=True, editable=False)
    email_domains = models.JSONField(
        default=list, blank=True, help_text="The email domains whose people the sign-in page sends here."
    )
    role_claim = models.CharField(
        max_length=100,
        default="groups",
        help_text="The claim whose values map to roles (a list or a string).",
    )
    role_map = models.JSONField(default=dict, blank=True, help_text=ROLE_MAP_HELP)
    default_role = models.CharField(
        max_length=20,
        choices=Role.choices,
        blank=True,
        help_text="The role of a person none of whose values is mapped; blank: they cannot sign in.",
    )
    required = models.BooleanField(
        default=False, help_text="The tenant's members sign in through this provider only, never by password."
    )
    enabled = models.BooleanField(default=True)
    accepts_identity_assertions = models.BooleanField(
        default=False,
        verbose_name="Accepts identity assertions (ID-JAG)",
        help_text="MCP clients may exchange this provider's identity assertions for tokens, with no "
        "consent screen (enterprise-managed authorization).",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug"]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


class ExternalIdentity(models.Model):
    """Which person a provider's subject is: linked once, by the subject, never by an email alone."""

    provider = models.ForeignKey(IdentityProvider, on_delete=models.CASCADE, related_name="identities")
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="external_identities")
    email = models.EmailField(blank=True, help_text="As the provider last asserted it.")
    created = models.DateTimeField(auto_now_add=True)
    last_signed_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["provider", "subject"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "subject"], name="external_identity_unique_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.provider.name} ({self.user})"


class Invitation(models.Model):
    """A tenant admin's invitation of a person, by email, with a role (``accounts.invitations``).

    Only the SHA-256 of the link's token is stored: the token itself is in the email alone. One
    invitation per tenant and address is open (neither accepted nor revoked) at a time; inviting
    the address again revokes the open one and sends a new link.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(help_text="Lower-cased; the account that accepts must have this address.")
    role = models.CharField(max_length=20, choices=Role.choices)
    invited_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="invitations_sent"
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        User, on_delete=models.SET_NULL, null=True, blank=True, related_name="invitations_accepted"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant__slug", "-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "email"],
                condition=models.Q(accepted_at__isnull=True, revoked_at__isnull=True),
                name="invitation_one_open_per_tenant_email",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "created"], name="invitation_tenant_created")]

    def __str__(self) -> str:
        return f"{self.email} to {self.tenant} ({self.role})"
