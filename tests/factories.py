from __future__ import annotations

import secrets
from datetime import timedelta

import factory
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import Application

from accounts.models import Membership, Role, Tenant, User
from oauth.models import AccessToken

DEFAULT_PASSWORD = "correct-horse-battery-staple"


class TenantFactory(factory.django.DjangoModelFactory[Tenant]):
    class Meta:
        model = Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user-{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", DEFAULT_PASSWORD)

    @factory.post_generation
    def persist_password(obj: User, create: bool, extracted: object, **kwargs: object) -> None:
        if create:
            obj.save()


class MembershipFactory(factory.django.DjangoModelFactory[Membership]):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    role = Role.VIEWER


class ApplicationFactory(factory.django.DjangoModelFactory[Application]):
    class Meta:
        model = Application

    name = factory.Sequence(lambda n: f"client-{n}")
    client_type = Application.CLIENT_PUBLIC
    authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
    redirect_uris = "http://127.0.0.1:9/callback"
    client_secret = ""


class AccessTokenFactory(factory.django.DjangoModelFactory[AccessToken]):
    """A token as DOT would have issued it; the membership keeps user and tenant consistent."""

    class Meta:
        model = AccessToken
        exclude = ("membership",)

    membership = factory.SubFactory(MembershipFactory)
    user = factory.LazyAttribute(lambda o: o.membership.user)
    tenant = factory.LazyAttribute(lambda o: o.membership.tenant)
    application = factory.SubFactory(ApplicationFactory)
    token = factory.LazyFunction(lambda: secrets.token_urlsafe(30))
    scope = "mcp:read mcp:write"
    expires = factory.LazyFunction(lambda: timezone.now() + timedelta(minutes=15))
    resource = factory.LazyFunction(lambda: [settings.MCP_RESOURCE_URL])
