"""The library in the admin: an operator imports a .bib file for a tenant and sees the report;
bad files are refused on the form; staff without the permission cannot import."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from accounts.models import Tenant, User
from research.models import LibraryPaper
from tests.support.admin_support import admin_url
from tests.support.factories import UserFactory

pytestmark = pytest.mark.django_db

IMPORT_URL = "/admin/research/librarypaper/import/"
BIB = (
    b"@article{lecun2015deep, title = {Deep learning}, author = {LeCun, Yann}, year = 2015,"
    b" doi = {10.1038/nature14539}}\n@misc{x, year = 2020}\n"
)


def _upload(client: Client, tenant: Tenant, content: bytes) -> object:
    return client.post(
        IMPORT_URL,
        {
            "tenant": tenant.pk,
            "file": SimpleUploadedFile("refs.bib", content, content_type="application/x-bibtex"),
        },
        follow=True,
    )


def test_the_import_page_is_linked_from_the_list_and_imports_a_file(
    client: Client, operator: User, tenant: Tenant
) -> None:
    listing = client.get(admin_url(LibraryPaper, "changelist"))
    assert reverse("admin:research_librarypaper_import") == IMPORT_URL
    assert IMPORT_URL in listing.content.decode()
    assert client.get(IMPORT_URL).status_code == 200

    response = _upload(client, tenant, BIB)

    assert response.status_code == 200  # type: ignore[attr-defined]
    shown = [str(message) for message in response.context["messages"]]  # type: ignore[attr-defined]
    assert shown == [
        f"{tenant.slug}: 1 created, 0 updated, 0 unchanged, 1 skipped.",
        "skipped x: missing title",
    ]
    assert response.redirect_chain[-1][0].endswith(f"?tenant__id__exact={tenant.pk}")  # type: ignore[attr-defined]
    paper = LibraryPaper.objects.get(tenant=tenant)
    assert (paper.title, paper.authors, paper.doi) == ("Deep learning", ["Yann LeCun"], "10.1038/nature14539")


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"@article{a, title = {\xff\xfe}}", "The BibTeX file is not valid UTF-8 text."),
        (
            b"@article{a, title = {a\x00b}}",
            "The BibTeX file contains a NUL character; it is not a text file.",
        ),
    ],
)
def test_a_file_that_is_not_text_is_refused_on_the_form(
    client: Client, operator: User, tenant: Tenant, content: bytes, error: str
) -> None:
    response = _upload(client, tenant, content)

    assert response.status_code == 200  # type: ignore[attr-defined]
    assert response.context["form"].errors == {"file": [error]}  # type: ignore[attr-defined]
    assert not LibraryPaper.objects.exists()


def test_an_unknown_tenant_is_refused_on_the_form(client: Client, operator: User, tenant: Tenant) -> None:
    response = client.post(IMPORT_URL, {"tenant": 999999, "file": SimpleUploadedFile("r.bib", BIB)})

    assert response.status_code == 200
    assert "tenant" in response.context["form"].errors


def test_staff_without_the_permission_cannot_import(client: Client, tenant: Tenant) -> None:
    client.force_login(UserFactory.create(username="staff", is_staff=True))

    assert client.get(IMPORT_URL).status_code == 403
    assert _upload(client, tenant, BIB).status_code == 403  # type: ignore[attr-defined]
    assert not LibraryPaper.objects.exists()


def test_people_not_signed_in_are_sent_to_the_login(client: Client) -> None:
    response = client.get(IMPORT_URL)

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_the_list_searches_and_filters_by_tenant(client: Client, operator: User, tenant: Tenant) -> None:
    other = Tenant.objects.create(slug="globex-test", name="Globex Test")
    LibraryPaper.objects.create(tenant=tenant, title="Deep learning", title_key="deep learning")
    LibraryPaper.objects.create(tenant=other, title="Dynamo", title_key="dynamo")

    searched = client.get(admin_url(LibraryPaper, "changelist"), {"q": "dynamo"})
    filtered = client.get(admin_url(LibraryPaper, "changelist"), {"tenant__id__exact": tenant.pk})

    assert [p.title for p in searched.context["cl"].result_list] == ["Dynamo"]
    assert [p.title for p in filtered.context["cl"].result_list] == ["Deep learning"]
