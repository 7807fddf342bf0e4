"""A BibTeX file fills a tenant's library: upserted by DOI, else by title, each skipped entry with
its reason, LaTeX decoded, and files no import should read refused with one clear message."""

from __future__ import annotations

import pytest

from accounts.models import Tenant
from core.errors import InvalidInput
from research import bibtex
from research.bibtex import bibtex_bytes_decode, library_import_bibtex
from research.models import LibraryPaper

pytestmark = pytest.mark.django_db

TWO = r"""
@article{lecun2015deep,
  title = {Deep learning},
  author = {LeCun, Yann and Bengio, Yoshua and Hinton, Geoffrey},
  journal = {Nature}, year = {2015}, doi = {https://doi.org/10.1038/NATURE14539}
}
@inproceedings{ongaro2014search,
  Title = {In Search of an {U}nderstandable Consensus Algorithm},
  Author = {Ongaro, Diego and Ousterhout, John},
  booktitle = {{USENIX} {ATC} 14}, year = 2014
}
"""


def test_entries_become_library_papers_with_decoded_latex(tenant: Tenant) -> None:
    text = r"""@article{s, title = {Sch{\"o}n {\&} Caf\'e: 50\% of {$x^2$} -- a {Study}},
      author = {M{\"u}ller, J{\"o}rg and {\v{Z}}{\'\i}dek, Augustin and {The {ACME} Consortium} and others},
      journal = {J. of {T}ests}, year = {2021}, doi = {10.1000/ABC}, url = {https://example.org/p},
      abstract = {An {\em important} result.}}"""
    report = library_import_bibtex(tenant_id=tenant.pk, text=text)

    assert report.summary() == "1 created, 0 updated, 0 unchanged, 0 skipped."
    paper = LibraryPaper.objects.get(tenant=tenant)
    assert paper.title == "Schön & Café: 50% of $x^2$ \u2013 a Study"
    assert paper.title_key == "schon cafe 50 of x 2 a study"
    assert paper.authors == ["Jörg Müller", "Augustin Žídek", "The ACME Consortium"]
    assert (paper.venue, paper.year, paper.doi) == ("J. of Tests", 2021, "10.1000/abc")
    assert paper.abstract == "An important result."
    assert (paper.url, paper.bibtex_key, paper.entry_type) == ("https://example.org/p", "s", "article")


def test_a_second_import_changes_nothing_and_an_edited_entry_updates_its_row(tenant: Tenant) -> None:
    first = library_import_bibtex(tenant_id=tenant.pk, text=TWO)
    again = library_import_bibtex(tenant_id=tenant.pk, text=TWO)
    edited = library_import_bibtex(
        tenant_id=tenant.pk,
        text=TWO.replace("year = 2014", "year = 2015").replace(
            "title = {Deep learning}", "title = {Deep Learning}"
        ),
    )

    assert (first.created, again.unchanged, edited.updated) == (2, 2, 2)
    assert LibraryPaper.objects.filter(tenant=tenant).count() == 2
    assert LibraryPaper.objects.get(tenant=tenant, doi="").year == 2015
    assert LibraryPaper.objects.get(tenant=tenant, doi="10.1038/nature14539").title == "Deep Learning"


def test_an_entry_without_a_doi_matches_by_title_and_a_doi_is_added_to_it(tenant: Tenant) -> None:
    library_import_bibtex(tenant_id=tenant.pk, text=TWO)
    report = library_import_bibtex(
        tenant_id=tenant.pk,
        text="@misc{raft, title = {In search of an understandable consensus algorithm.},"
        " doi = {10.5555/2643634}}",
    )

    assert report.updated == 1
    raft = LibraryPaper.objects.get(
        tenant=tenant, title_key="in search of an understandable consensus algorithm"
    )
    assert raft.doi == "10.5555/2643634"
    assert raft.authors == ["Diego Ongaro", "John Ousterhout"]


def test_same_title_with_another_doi_is_another_paper(tenant: Tenant) -> None:
    library_import_bibtex(tenant_id=tenant.pk, text=TWO)
    report = library_import_bibtex(
        tenant_id=tenant.pk, text="@article{erratum, title = {Deep learning}, doi = {10.1038/nature99999}}"
    )

    assert report.created == 1
    assert LibraryPaper.objects.filter(tenant=tenant, title_key="deep learning").count() == 2


def test_libraries_are_per_tenant(tenant: Tenant) -> None:
    other = Tenant.objects.create(slug="globex-test", name="Globex Test")
    library_import_bibtex(tenant_id=tenant.pk, text=TWO)
    report = library_import_bibtex(tenant_id=other.pk, text=TWO)

    assert report.created == 2
    assert LibraryPaper.objects.filter(tenant=other).count() == 2


def test_skipped_entries_say_why_and_the_others_are_imported(tenant: Tenant) -> None:
    text = (
        TWO
        + "@article{notitle, author = {Nobody}, year = 2020}\n"
        + "@article{lecun2015deep, title = {Duplicate key}}\n"
        + "@article{punct, title = {?!}}\n"
        + "@article{long, title = {"
        + "x" * 1001
        + "}}\n"
        + "@misc{broken, title = {unclosed\n"
        + "@article{after, title = {Still Imported}}\n"
    )
    report = library_import_bibtex(tenant_id=tenant.pk, text=text)

    assert report.created == 3
    assert report.lines()[1:] == [
        "skipped notitle: missing title",
        "skipped lecun2015deep: duplicate key in this file",
        "skipped punct: title has no letters or digits and no DOI",
        "skipped long: title longer than 1000 characters",
        "skipped broken: could not be parsed (line 16)",
    ]


def test_hostile_values_are_cleaned_and_bounded(tenant: Tenant) -> None:
    authors = " and ".join(f"Author{i}, A\x07" for i in range(150))
    text = (
        "@article{h, title = {Ti\x1btle \u202e}, author = {" + authors + "}, year = {99999}, "
        "url = {javascript:alert(1)}, doi = {not a doi}, abstract = {" + "w " * 15000 + "}, "
        "journal = {" + "{" * 3000 + "deep" + "}" * 3000 + "}}"
    )
    report = library_import_bibtex(tenant_id=tenant.pk, text=text)

    assert report.created == 1
    paper = LibraryPaper.objects.get(tenant=tenant)
    assert paper.title == "Title"
    assert len(paper.authors) == bibtex.AUTHORS_MAX
    assert paper.authors[0] == "A Author0"
    assert (paper.year, paper.url, paper.doi) == (None, "", "")
    assert len(paper.abstract) <= 20000
    assert len(paper.venue) <= 500


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("@article{a, title = {Nul\x00}}", bibtex.HAS_NUL),
        ("@article{a, title = {Lone \ud800}}", bibtex.NOT_UTF8),
        ("%" * (bibtex.BIBTEX_MAX_BYTES + 1), bibtex.TOO_LARGE),
    ],
    ids=["nul", "surrogate", "too-large"],
)
def test_text_no_import_should_read_is_refused_whole(tenant: Tenant, text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        library_import_bibtex(tenant_id=tenant.pk, text=text)
    assert caught.value.message == message
    assert not LibraryPaper.objects.exists()


def test_too_many_entries_are_refused(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bibtex, "ENTRIES_MAX", 1)
    with pytest.raises(InvalidInput, match="more than"):
        library_import_bibtex(tenant_id=tenant.pk, text=TWO)


def test_uploaded_bytes_must_be_utf8_and_bounded() -> None:
    assert bibtex_bytes_decode("\ufeff@misc{a, title={é}}".encode()) == "@misc{a, title={é}}"
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        bibtex_bytes_decode(b"@misc{a, title={\xff}}")
    with pytest.raises(InvalidInput, match="larger than"):
        bibtex_bytes_decode(b" " * (bibtex.BIBTEX_MAX_BYTES + 1))
