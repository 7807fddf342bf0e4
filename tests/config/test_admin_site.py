"""Operators run Gatehouse from the Django admin: every page opens, every action works, and only
staff with the right permissions get in."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from oauth2_provider.models import Application, get_id_token_model

from accounts.models import IdentityProvider, Invitation, Membership, Tenant, User
from conversations.models import Conversation, SessionBinding, Turn
from core.models import AuditEvent, RateLimitRule
from data_agent.models import AgentPreference, Dataset, DataSource, Ontology
from jobs.models import Job, JobState
from jobs.steps import job_step_run
from language_models.models import LanguageModel, LlmBudget, LlmUsage
from mcp_gateway.models import McpSession, TenantToolset
from oauth.models import (
    AccessToken,
    Grant,
    RedirectUriPattern,
    RefreshToken,
    RememberedConsent,
    ServiceClient,
)
from oauth.service_clients import service_client_create
from research.models import LibraryPaper
from tests.support.admin_support import admin_url
from tests.support.factories import (
    AccessTokenFactory,
    AgentPreferenceFactory,
    ApplicationFactory,
    AuditEventFactory,
    ConversationFactory,
    DatasetFactory,
    DataSourceFactory,
    GrantFactory,
    LanguageModelFactory,
    McpSessionFactory,
    MembershipFactory,
    OntologyFactory,
    RateLimitRuleFactory,
    RedirectUriPatternFactory,
    RefreshTokenFactory,
    RememberedConsentFactory,
    SessionBindingFactory,
    TenantFactory,
    TurnFactory,
    UserFactory,
)
from tests.support.llm_admin_support import LlmBudgetFactory, LlmUsageFactory
from upstreams.models import Upstream
from workflows.models import Workflow, WorkflowContext

pytestmark = pytest.mark.django_db


def _id_token() -> Model:
    membership = MembershipFactory.create()
    return get_id_token_model().objects.create(
        user=membership.user,
        application=ApplicationFactory.create(),
        expires=timezone.now() + timedelta(minutes=5),
        scope="openid",
    )


def _task_result() -> DBTaskResult:
    enqueued = job_step_run.enqueue(job_id=str(uuid.uuid4()), token=str(uuid.uuid4()))
    return DBTaskResult.objects.get(pk=enqueued.id)


def _job() -> Job:
    membership = MembershipFactory.create()
    return Job.objects.create(
        tenant=membership.tenant, user=membership.user, kind="literature_search", input={"query": "x"}
    )


def _workflow() -> Workflow:
    return Workflow.objects.create(tenant=TenantFactory.create(), name="Sales analyst")


# One object per admin page. A model registered without an entry here fails the suite.
MAKERS: dict[type[Model], Callable[[], Model]] = {
    Group: lambda: Group.objects.create(name=f"group-{Group.objects.count()}"),
    User: lambda: UserFactory.create(),
    Tenant: lambda: TenantFactory.create(),
    Membership: lambda: MembershipFactory.create(),
    IdentityProvider: lambda: IdentityProvider.objects.create(
        tenant=TenantFactory.create(), name="SSO", issuer="https://sso.example.test", client_id="gatehouse"
    ),
    Invitation: lambda: Invitation.objects.create(
        tenant=TenantFactory.create(),
        email="ada@example.com",
        role="viewer",
        token_hash=uuid.uuid4().hex * 2,
        expires=timezone.now() + timedelta(days=7),
    ),
    Application: lambda: ApplicationFactory.create(),
    AccessToken: lambda: AccessTokenFactory.create(),
    RefreshToken: lambda: RefreshTokenFactory.create(),
    Grant: lambda: GrantFactory.create(),
    get_id_token_model(): _id_token,
    McpSession: lambda: McpSessionFactory.create(),
    AuditEvent: lambda: AuditEventFactory.create(),
    RateLimitRule: lambda: RateLimitRuleFactory.create(tenant=TenantFactory.create()),
    RedirectUriPattern: lambda: RedirectUriPatternFactory.create(application=ApplicationFactory.create()),
    RememberedConsent: lambda: RememberedConsentFactory.create(),
    ServiceClient: lambda: service_client_create(tenant=TenantFactory.create(), name="Job", role="viewer")[0],
    DataSource: lambda: DataSourceFactory.create(),
    Ontology: lambda: OntologyFactory.create(),
    Dataset: lambda: DatasetFactory.create(),
    LanguageModel: lambda: LanguageModelFactory.create(),
    AgentPreference: lambda: AgentPreferenceFactory.create(),
    Workflow: lambda: _workflow(),
    WorkflowContext: lambda: WorkflowContext.objects.create(workflow=_workflow(), name="orders"),
    Conversation: lambda: ConversationFactory.create(),
    Turn: lambda: TurnFactory.create(),
    SessionBinding: lambda: SessionBindingFactory.create(),
    LlmBudget: lambda: LlmBudgetFactory.create(),
    LlmUsage: lambda: LlmUsageFactory.create(),
    LibraryPaper: lambda: LibraryPaper.objects.create(
        tenant=TenantFactory.create(),
        title="Deep learning",
        title_key="deep learning",
        doi="10.1038/nature14539",
    ),
    Upstream: lambda: Upstream.objects.create(
        tenant=TenantFactory.create(), name="docs", url="http://127.0.0.1:9/mcp", tool_names=["echo"]
    ),
    Job: lambda: _job(),
    DBTaskResult: lambda: _task_result(),
}
REGISTERED = sorted(admin.site._registry, key=lambda model: model._meta.label)


def _label(model: type[Model]) -> str:
    return model._meta.label


@pytest.fixture
def operator_request(rf, operator):
    request = rf.get("/admin/")
    request.user = operator
    return request


def test_every_registered_model_has_a_smoke_test_object():
    assert set(REGISTERED) <= set(MAKERS), "add the new admin model to MAKERS"


@pytest.mark.parametrize("model", REGISTERED, ids=_label)
def test_an_operator_can_open_the_list_and_an_object(client, operator, model):
    obj = MAKERS[model]()
    assert client.get(admin_url(model, "changelist")).status_code == 200
    response = client.get(admin_url(model, "change", obj.pk))
    assert response.status_code == 200
    assert response.context["original"].pk == obj.pk


@pytest.mark.parametrize("model", REGISTERED, ids=_label)
def test_the_add_page_opens_exactly_where_adding_is_allowed(client, operator, operator_request, model):
    allowed = admin.site._registry[model].has_add_permission(operator_request)
    assert client.get(admin_url(model, "add")).status_code == (200 if allowed else 403)


@pytest.mark.parametrize("model", REGISTERED, ids=_label)
def test_the_delete_confirmation_opens_exactly_where_deleting_is_allowed(
    client, operator, operator_request, model
):
    obj = MAKERS[model]()
    allowed = admin.site._registry[model].has_delete_permission(operator_request, obj)
    assert client.get(admin_url(model, "delete", obj.pk)).status_code == (200 if allowed else 403)


@pytest.mark.parametrize("model", REGISTERED, ids=_label)
def test_every_filter_choice_and_a_search_answer(client, operator, model):
    # Two objects, so that a related-object filter has a choice to offer.
    MAKERS[model]()
    MAKERS[model]()
    model_admin = admin.site._registry[model]
    changelist = client.get(admin_url(model, "changelist")).context["cl"]
    assert changelist.has_filters == bool(model_admin.list_filter)
    links = [
        choice["query_string"]
        for spec in changelist.filter_specs
        for choice in spec.choices(changelist)
        if "query_string" in choice
    ]
    assert bool(links) == bool(model_admin.list_filter)
    for link in links:
        response = client.get(admin_url(model, "changelist") + link)
        # A refused lookup redirects with ?e=1.
        assert response.status_code == 200, link
    if model_admin.search_fields:
        assert client.get(admin_url(model, "changelist"), {"q": "a"}).status_code == 200


@pytest.mark.parametrize("model", REGISTERED, ids=_label)
def test_a_non_staff_user_is_sent_to_the_login_from_every_page(client, model):
    obj = MAKERS[model]()
    client.force_login(UserFactory.create(username="plain"))
    for url in (
        admin_url(model, "changelist"),
        admin_url(model, "add"),
        admin_url(model, "change", obj.pk),
        admin_url(model, "delete", obj.pk),
    ):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["location"].startswith("/admin/login/")


@pytest.mark.parametrize("model", REGISTERED, ids=_label)
def test_staff_without_permissions_are_refused(client, model):
    obj = MAKERS[model]()
    client.force_login(UserFactory.create(username="junior", is_staff=True))
    assert client.get(admin_url(model, "changelist")).status_code == 403
    assert client.get(admin_url(model, "change", obj.pk)).status_code == 403


# Actions tested in test_admin_oauth.py, test_admin_audit.py, test_data_sources.py,
# test_language_models.py, test_llm_gateway_admin.py and upstreams/test_admin_upstreams.py;
# delete_selected is tested here.
CUSTOM_ACTIONS: dict[type[Model], set[str]] = {
    AccessToken: {"revoke_tokens"},
    RefreshToken: {"revoke_tokens"},
    McpSession: {"terminate"},
    AuditEvent: {"export_csv"},
    DataSource: {"generate_ontology"},
    LanguageModel: {"test_model"},
    LlmUsage: {"export_csv"},
    Upstream: {"test_connection"},
    Job: {"cancel_jobs"},
}


@pytest.mark.parametrize("model", REGISTERED, ids=_label)
def test_every_action_is_known_and_delete_selected_deletes(client, operator, operator_request, model):
    model_admin = admin.site._registry[model]
    actions = set(model_admin.get_actions(operator_request))
    assert actions - {"delete_selected"} == CUSTOM_ACTIONS.get(model, set()), "test the new action"
    if "delete_selected" not in actions:
        return
    obj = MAKERS[model]()
    response = client.post(
        admin_url(model, "changelist"),
        {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert not model.objects.filter(pk=obj.pk).exists()


def test_an_operator_cancels_running_and_waiting_jobs_and_leaves_finished_ones(client, operator):
    running, waiting, complete = _job(), _job(), _job()
    Job.objects.filter(pk=waiting.pk).update(state=JobState.WAITING, checkpoint_kind="plan")
    Job.objects.filter(pk=complete.pk).update(state=JobState.COMPLETE)
    response = client.post(
        admin_url(Job, "changelist"),
        {"action": "cancel_jobs", "_selected_action": [running.pk, waiting.pk, complete.pk]},
    )
    assert response.status_code == 302
    states = dict(Job.objects.values_list("pk", "state"))
    assert states == {running.pk: "cancelled", waiting.pk: "cancelled", complete.pk: "complete"}


def test_a_non_staff_user_cannot_export_the_audit_trail(client):
    AuditEventFactory.create()
    client.force_login(UserFactory.create(username="plain"))
    response = client.get(reverse("admin:core_auditevent_export"))
    assert response.status_code == 302
    assert response["location"].startswith("/admin/login/")


def test_staff_without_permissions_cannot_export_the_audit_trail(client):
    AuditEventFactory.create()
    client.force_login(UserFactory.create(username="junior", is_staff=True))
    assert client.get(reverse("admin:core_auditevent_export")).status_code == 403


# Tenants and members


def test_an_operator_can_add_a_member_with_a_role(client, operator, tenant):
    person = UserFactory.create(username="newcomer")
    response = client.post(
        reverse("admin:accounts_membership_add"),
        {"user": person.pk, "tenant": tenant.pk, "role": "contributor"},
    )
    assert response.status_code == 302
    assert person.memberships.get().role == "contributor"


def test_the_same_person_cannot_join_a_tenant_twice(client, operator, member):
    response = client.post(
        reverse("admin:accounts_membership_add"),
        {"user": member.user.pk, "tenant": member.tenant.pk, "role": "admin"},
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()


def test_an_operator_can_change_a_role_from_the_list(client, operator, member):
    response = client.post(
        reverse("admin:accounts_membership_changelist"),
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-0-id": member.pk,
            "form-0-role": "contributor",
            "_save": "Save",
        },
    )
    assert response.status_code == 302
    member.refresh_from_db()
    assert member.role == "contributor"


def _changelist_queries(client, model: type[Model]) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(admin_url(model, "changelist")).status_code == 200
    return len(queries)


@pytest.mark.parametrize(
    ("model", "factory"),
    [
        (AuditEvent, AuditEventFactory),
        (McpSession, McpSessionFactory),
        (AccessToken, AccessTokenFactory),
        (RefreshToken, RefreshTokenFactory),
        (Grant, GrantFactory),
        (Membership, MembershipFactory),
        (Application, ApplicationFactory),
        (
            RateLimitRule,
            lambda: RateLimitRuleFactory.create(
                tenant=TenantFactory.create(), target=TenantFactory.create().slug
            ),
        ),
    ],
    ids=lambda value: value._meta.label if isinstance(value, type) and issubclass(value, Model) else "",
)
def test_a_longer_list_costs_no_extra_queries(client, operator, model, factory):
    factory()
    few = _changelist_queries(client, model)
    for _ in range(5):
        factory()
    assert _changelist_queries(client, model) == few


# Rate-limit rules


def _rule_form(**overrides: Any) -> dict[str, Any]:
    return {"scope": "tool", "target": "", "tenant": "", "limit": "10", "period_seconds": "60", **overrides}


def test_an_operator_can_add_a_tenant_tool_limit(client, operator, tenant):
    response = client.post(admin_url(RateLimitRule, "add"), _rule_form(target="whoami", tenant=tenant.pk))
    assert response.status_code == 302
    rule = RateLimitRule.objects.get()
    assert (rule.scope, rule.target, rule.tenant, rule.limit) == ("tool", "whoami", tenant, 10)


@pytest.mark.parametrize("scope", ["login", "authorize", "register"])
def test_a_per_address_limit_refuses_a_tenant_and_a_target(client, operator, tenant, scope):
    response = client.post(
        admin_url(RateLimitRule, "add"), _rule_form(scope=scope, tenant=tenant.pk, target="x")
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "leave tenant blank" in errors["tenant"][0]
    assert "targets are for tool and resource limits" in errors["target"][0]
    assert not RateLimitRule.objects.exists()


def test_a_zero_second_period_is_refused(client, operator):
    response = client.post(admin_url(RateLimitRule, "add"), _rule_form(period_seconds="0"))
    assert response.context["adminform"].form.errors["period_seconds"] == [
        "The period must be at least one second."
    ]


def test_a_second_rule_for_the_same_scope_target_and_tenant_is_refused(client, operator):
    RateLimitRuleFactory.create(scope="resource", target="", tenant=None)
    response = client.post(admin_url(RateLimitRule, "add"), _rule_form(scope="resource"))
    assert response.status_code == 200
    assert RateLimitRule.objects.count() == 1


def test_the_rule_list_names_the_defaults_it_overrides(client, operator, settings):
    settings.GATEHOUSE = {**settings.GATEHOUSE, "RATE_LIMITS": {"tool": "7/hour", "login": None}}
    content = client.get(admin_url(RateLimitRule, "changelist")).content.decode()
    assert "<code>tool</code> 7/hour" in content
    assert "<code>login</code> no limit" in content


def test_tenant_toolsets_are_edited_inline_on_the_tenant(client, operator, tenant):
    page = client.get(reverse("admin:accounts_tenant_change", args=[tenant.pk]))
    assert "toolsets-TOTAL_FORMS" in page.content.decode()
    assert not TenantToolset.objects.exists()
