"""Who signs in through a tenant's identity provider, with which role (``accounts.sign_in``): the
subject is the person, an email links an existing account only when nothing else could own it,
the role is mapped anew each time, and whatever the claims hold, the answer is a role or a
refusal saying why."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from accounts.models import ExternalIdentity, IdentityProvider, Membership, Role, User
from accounts.sign_in.people import NO_ROLE, person_sign_in
from accounts.sign_in.roles import claim_values, role_from_claims, role_map_parse
from core.errors import PermissionDenied
from tests.support.factories import MembershipFactory, TenantFactory, UserFactory

pytestmark = pytest.mark.django_db

ROLE_MAP = {"gh-admins": "admin", "gh-builders": "contributor", "gh-readers": "viewer"}


@pytest.fixture
def provider(tenant) -> IdentityProvider:
    return IdentityProvider.objects.create(
        tenant=tenant,
        name="Acme SSO",
        issuer="https://sso.acme.test",
        client_id="gatehouse",
        email_domains=["acme.test"],
        role_claim="groups",
        role_map=ROLE_MAP,
    )


def _claims(sub: str = "s-1", **extra: object) -> dict[str, object]:
    return {"sub": sub, "email": "ada@acme.test", "email_verified": True, "groups": ["gh-readers"], **extra}


# The role map


def test_the_highest_mapped_value_wins_and_paths_reach_nested_claims():
    claims = {"groups": ["other", "gh-readers", "gh-admins"], "realm_access": {"roles": ["gh-builders"]}}
    assert role_from_claims(claims=claims, claim="groups", role_map=ROLE_MAP, default_role="") == Role.ADMIN
    nested = role_from_claims(claims=claims, claim="realm_access.roles", role_map=ROLE_MAP, default_role="")
    assert nested == Role.CONTRIBUTOR
    assert role_from_claims(
        claims={"groups": "gh-readers"}, claim="groups", role_map=ROLE_MAP, default_role=""
    )
    unmapped = {"groups": ["nobody"]}
    assert role_from_claims(claims=unmapped, claim="groups", role_map=ROLE_MAP, default_role="") is None
    assert (
        role_from_claims(claims=unmapped, claim="groups", role_map=ROLE_MAP, default_role="viewer")
        == "viewer"
    )


@pytest.mark.parametrize(
    "value",
    [None, 7, {"gh-admins": True}, [["gh-admins"]], [7, None], ["x" * 501], "", ["\x00gh-admins"]],
    ids=range(8),
)
def test_claims_of_any_other_shape_map_to_nothing(value):
    assert (
        role_from_claims(claims={"groups": value}, claim="groups", role_map=ROLE_MAP, default_role="") is None
    )


def test_a_path_through_a_non_object_reads_nothing():
    assert claim_values(claims={"realm_access": ["roles"]}, claim="realm_access.roles") == []
    assert claim_values(claims={"groups": list(map(str, range(5000)))}, claim="groups")[-1] == "999"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gh-admins admin", "Line 1: write the claim's value"),
        ("= admin", "Line 1: write the claim's value"),
        ("ok = viewer\ngh = owner", "Line 2: 'owner' is not a role"),
        ("a = admin\na = viewer", "Line 2: the value 'a' is already mapped"),
    ],
)
def test_a_role_map_line_that_cannot_be_read_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        role_map_parse(text=text)


def test_a_role_map_reads_comments_blank_lines_and_values_with_equals_signs():
    text = "# admins\n\ncn=admins,ou=groups = Admin\n  gh-readers=viewer  "
    assert role_map_parse(text=text) == {"cn=admins,ou=groups": "admin", "gh-readers": "viewer"}


# Who the person is


def test_a_first_sign_in_makes_a_member_with_the_mapped_role(provider):
    signed = person_sign_in(provider_id=provider.pk, claims=_claims(name="Ada \u202eLovelace"))
    assert signed.created
    assert (signed.role, signed.role_before) == (Role.VIEWER, None)
    user = signed.user
    assert user.username == "ada@acme.test"
    assert user.display_name == "Ada Lovelace"
    assert not user.has_usable_password()
    assert Membership.objects.get(user=user, tenant=provider.tenant).role == Role.VIEWER
    assert ExternalIdentity.objects.get(provider=provider, subject="s-1").user == user


def test_the_role_follows_the_groups_at_each_sign_in_and_none_removes_the_member(provider):
    first = person_sign_in(provider_id=provider.pk, claims=_claims())
    promoted = person_sign_in(provider_id=provider.pk, claims=_claims(groups=["gh-admins"]))
    assert promoted.user == first.user
    assert (promoted.role, promoted.role_before, promoted.created) == (Role.ADMIN, Role.VIEWER, False)
    with pytest.raises(PermissionDenied) as refused:
        person_sign_in(provider_id=provider.pk, claims=_claims(groups=["left-the-team"]))
    assert refused.value.message == NO_ROLE.format(provider="Acme SSO", tenant=provider.tenant.name)
    assert refused.value.data == {"reason": "no_role", "user": first.user.pk, "removed": True}
    assert not Membership.objects.filter(user=first.user).exists()


def test_the_subject_not_the_email_is_the_person(provider):
    ada = person_sign_in(provider_id=provider.pk, claims=_claims())
    # Another subject asserting the same address is another person.
    other = person_sign_in(provider_id=provider.pk, claims=_claims(sub="s-2"))
    assert other.user != ada.user
    assert other.user.username.startswith(f"{provider.tenant.slug}.")


def test_a_verified_email_of_the_providers_domain_links_the_tenants_own_account(provider):
    existing = MembershipFactory.create(
        user=UserFactory.create(username="ada", email="Ada@acme.test"),
        tenant=provider.tenant,
        role=Role.CONTRIBUTOR,
    ).user
    signed = person_sign_in(provider_id=provider.pk, claims=_claims(groups=["gh-builders"]))
    assert signed.user == existing
    assert not signed.created
    assert existing.has_usable_password()


@pytest.mark.parametrize(
    "case", ["unverified", "verified as a string", "other domain", "member elsewhere", "two accounts"]
)
def test_an_email_links_nothing_another_could_own(provider, case):
    user = UserFactory.create(username="ada", email="ada@acme.test")
    claims = _claims()
    if case == "unverified":
        claims["email_verified"] = False
    elif case == "verified as a string":
        claims["email_verified"] = "true"
    elif case == "other domain":
        user.email = "ada@elsewhere.test"
        user.save()
        claims["email"] = "ada@elsewhere.test"
    elif case == "member elsewhere":
        MembershipFactory.create(user=user, tenant=TenantFactory.create(slug="another"), role=Role.ADMIN)
    else:
        UserFactory.create(username="ada-2", email="ADA@acme.test")
    signed = person_sign_in(provider_id=provider.pk, claims=claims)
    assert signed.user != user
    assert signed.created


@pytest.mark.parametrize(
    "sub",
    ["", None, 42, "x" * 256, "s\x00", "\ud800"],
    ids=["empty", "none", "int", "long", "nul", "surrogate"],
)
def test_an_unusable_subject_is_refused_and_makes_nothing(provider, sub):
    with pytest.raises(PermissionDenied) as refused:
        person_sign_in(provider_id=provider.pk, claims=_claims(sub=sub))
    assert refused.value.data == {"reason": "no_subject"}
    assert not ExternalIdentity.objects.exists()


def test_a_disabled_account_or_provider_cannot_sign_in(provider):
    ada = person_sign_in(provider_id=provider.pk, claims=_claims()).user
    User.objects.filter(pk=ada.pk).update(is_active=False)
    with pytest.raises(PermissionDenied) as disabled:
        person_sign_in(provider_id=provider.pk, claims=_claims())
    assert disabled.value.data == {"reason": "disabled"}
    IdentityProvider.objects.filter(pk=provider.pk).update(enabled=False)
    with pytest.raises(PermissionDenied) as off:
        person_sign_in(provider_id=provider.pk, claims=_claims(sub="s-9"))
    assert off.value.data == {"reason": "provider_off"}


@pytest.mark.django_db(transaction=True)
def test_two_first_sign_ins_of_one_subject_at_once_make_one_account(provider):
    results: list[object] = []
    barrier = threading.Barrier(2)

    def sign_in() -> None:
        try:
            barrier.wait(5)
            results.append(person_sign_in(provider_id=provider.pk, claims=_claims()).user.pk)
        except Exception as error:
            results.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_in) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(results) == 2
    assert results[0] == results[1], results
    assert ExternalIdentity.objects.count() == 1
    assert User.objects.count() == 1
