from __future__ import annotations

import secrets
from datetime import timedelta

import factory
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import Application

from accounts.models import Membership, Role, Tenant, User
from conversations.models import Conversation, SessionBinding, Turn, TurnKind
from core.crypto import secret_encrypt
from core.identity import Identity
from core.models import AuditAction, AuditEvent, AuditOutcome, RateLimitRule, RateLimitScope
from data_agent.models import (
    AgentPreference,
    Dataset,
    DatasetField,
    DataSource,
    DataSourceKind,
    Ontology,
    OntologyStatus,
    Relationship,
)
from language_models.models import LanguageModel
from mcp_gateway.models import McpSession
from oauth.models import AccessToken, Grant, RedirectUriPattern, RefreshToken, RememberedConsent
from oauth.token_storage import token_checksum

DEFAULT_PASSWORD = "correct-horse-battery-staple"


class IdentityFactory(factory.Factory[Identity]):
    """A caller as the endpoint resolves one, for code that takes an ``Identity`` without a token."""

    class Meta:
        model = Identity

    user_id = 1
    username = "alice"
    tenant_id = 1
    tenant_slug = "acme"
    tenant_name = "Acme"
    role = "admin"
    scopes: frozenset[str] = frozenset({"mcp:read"})
    application_id = 1
    client_id = "client"
    client_name = "Client"
    token_id = 1


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


class RefreshTokenFactory(factory.django.DjangoModelFactory[RefreshToken]):
    """A live refresh token bound to an access token of the same user, tenant and client."""

    class Meta:
        model = RefreshToken

    access_token = factory.SubFactory(AccessTokenFactory)
    user = factory.LazyAttribute(lambda o: o.access_token.user)
    tenant = factory.LazyAttribute(lambda o: o.access_token.tenant)
    application = factory.LazyAttribute(lambda o: o.access_token.application)
    token = factory.LazyFunction(lambda: secrets.token_urlsafe(30))


class GrantFactory(factory.django.DjangoModelFactory[Grant]):
    class Meta:
        model = Grant
        exclude = ("membership",)

    membership = factory.SubFactory(MembershipFactory)
    user = factory.LazyAttribute(lambda o: o.membership.user)
    tenant = factory.LazyAttribute(lambda o: o.membership.tenant)
    application = factory.SubFactory(ApplicationFactory)
    # Stored as the validator stores codes: only the checksum (pass ``code=token_checksum(plain)``
    # to exchange a known code).
    code = factory.LazyFunction(lambda: token_checksum(secrets.token_urlsafe(30)))
    expires = factory.LazyFunction(lambda: timezone.now() + timedelta(minutes=10))
    redirect_uri = "http://127.0.0.1:9/callback"
    scope = "mcp:read"
    code_challenge = factory.LazyFunction(lambda: secrets.token_urlsafe(32))
    code_challenge_method = "S256"


class McpSessionFactory(factory.django.DjangoModelFactory[McpSession]):
    class Meta:
        model = McpSession
        exclude = ("membership",)

    membership = factory.SubFactory(MembershipFactory)
    id = factory.LazyFunction(lambda: secrets.token_hex(16))
    user = factory.LazyAttribute(lambda o: o.membership.user)
    tenant = factory.LazyAttribute(lambda o: o.membership.tenant)
    application = factory.SubFactory(ApplicationFactory)
    scopes = "mcp:read"
    protocol_version = "2025-11-25"
    client_name = "Test client"
    last_seen = factory.LazyFunction(timezone.now)


class AuditEventFactory(factory.django.DjangoModelFactory[AuditEvent]):
    """An event by a member of a tenant; user, tenant and the stored username agree."""

    class Meta:
        model = AuditEvent
        exclude = ("membership",)

    membership = factory.SubFactory(MembershipFactory)
    action = AuditAction.TOOL_CALLED
    outcome = AuditOutcome.OK
    user = factory.LazyAttribute(lambda o: o.membership.user)
    tenant = factory.LazyAttribute(lambda o: o.membership.tenant)
    username = factory.LazyAttribute(lambda o: o.membership.user.username)
    client_id = "test-client"
    session_id = factory.LazyFunction(lambda: secrets.token_hex(16))
    request_id = factory.LazyFunction(lambda: secrets.token_hex(8))
    ip = "127.0.0.1"
    target = "whoami"
    duration_ms = 1.5
    detail = factory.LazyFunction(dict)


class RateLimitRuleFactory(factory.django.DjangoModelFactory[RateLimitRule]):
    class Meta:
        model = RateLimitRule

    scope = RateLimitScope.TOOL
    target = ""
    tenant = None
    limit = 10
    period_seconds = 60


class RedirectUriPatternFactory(factory.django.DjangoModelFactory[RedirectUriPattern]):
    class Meta:
        model = RedirectUriPattern

    pattern = factory.Sequence(lambda n: f"https://connectors-{n}.example/oauth/*")
    application = None
    note = "per-connector callbacks"


class RememberedConsentFactory(factory.django.DjangoModelFactory[RememberedConsent]):
    class Meta:
        model = RememberedConsent

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    application = factory.SubFactory(ApplicationFactory)
    scopes = "mcp:read"


class DataSourceFactory(factory.django.DjangoModelFactory[DataSource]):
    class Meta:
        model = DataSource
        exclude = ("url",)

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"source-{n}")
    kind = DataSourceKind.SQLITE
    url = "sqlite:////nonexistent/sample.sqlite3"
    url_encrypted = factory.LazyAttribute(lambda o: secret_encrypt(plaintext=o.url))


class OntologyFactory(factory.django.DjangoModelFactory[Ontology]):
    """A ready ontology in its data source's tenant."""

    class Meta:
        model = Ontology

    data_source = factory.SubFactory(DataSourceFactory)
    tenant = factory.LazyAttribute(lambda o: o.data_source.tenant)
    name = factory.Sequence(lambda n: f"ontology-{n}")
    description = "Sales"
    status = OntologyStatus.READY


class DatasetFactory(factory.django.DjangoModelFactory[Dataset]):
    class Meta:
        model = Dataset

    ontology = factory.SubFactory(OntologyFactory)
    name = factory.Sequence(lambda n: f"dataset_{n}")
    description = "Rows"
    source_table = factory.LazyAttribute(lambda o: o.name)


class DatasetFieldFactory(factory.django.DjangoModelFactory[DatasetField]):
    class Meta:
        model = DatasetField

    dataset = factory.SubFactory(DatasetFactory)
    name = factory.Sequence(lambda n: f"field_{n}")
    type = "integer"
    source_column = factory.LazyAttribute(lambda o: o.name)


class RelationshipFactory(factory.django.DjangoModelFactory[Relationship]):
    """A join between two fields of the same ontology."""

    class Meta:
        model = Relationship

    from_field = factory.SubFactory(DatasetFieldFactory)
    ontology = factory.LazyAttribute(lambda o: o.from_field.dataset.ontology)
    to_field = factory.LazyAttribute(
        lambda o: DatasetFieldFactory.create(
            dataset=DatasetFactory.create(ontology=o.from_field.dataset.ontology)
        )
    )


class LanguageModelFactory(factory.django.DjangoModelFactory[LanguageModel]):
    """A tenant's model; pass ``api_key`` for a stored (encrypted) key."""

    class Meta:
        model = LanguageModel
        exclude = ("api_key",)

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"model-{n}")
    model = "openai/gpt-4o-mini"
    api_key = ""
    api_key_encrypted = factory.LazyAttribute(
        lambda o: secret_encrypt(plaintext=o.api_key) if o.api_key else ""
    )


class AgentPreferenceFactory(factory.django.DjangoModelFactory[AgentPreference]):
    class Meta:
        model = AgentPreference

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    default_time_period = "last 12 months"


class ConversationFactory(factory.django.DjangoModelFactory[Conversation]):
    """A member's conversation in their membership's tenant."""

    class Meta:
        model = Conversation
        exclude = ("membership",)

    membership = factory.SubFactory(MembershipFactory)
    user = factory.LazyAttribute(lambda o: o.membership.user)
    tenant = factory.LazyAttribute(lambda o: o.membership.tenant)
    client_id = "test-client"


class TurnFactory(factory.django.DjangoModelFactory[Turn]):
    class Meta:
        model = Turn

    conversation = factory.SubFactory(ConversationFactory)
    kind = TurnKind.COMMAND
    request = "orders/List_orders <limit>5</limit>"
    output = factory.LazyFunction(lambda: {"success": True, "command_name": "orders/List_orders"})
    traces = factory.LazyFunction(list)
    success = True
    duration_ms = 12.5


class SessionBindingFactory(factory.django.DjangoModelFactory[SessionBinding]):
    """A session bound to one of its person's conversations, in the same tenant."""

    class Meta:
        model = SessionBinding

    conversation = factory.SubFactory(ConversationFactory)
    key = factory.LazyFunction(lambda: f"session:{secrets.token_urlsafe(32)}")
    user = factory.LazyAttribute(lambda o: o.conversation.user)
    tenant = factory.LazyAttribute(lambda o: o.conversation.tenant)
    context = "orders"
