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
