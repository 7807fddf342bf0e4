"""The README and docs/ stay navigable and runnable: every relative link reaches a file (and the
heading it names), and every ``manage.py <command>`` they tell a reader to type exists.

The README is short and sends readers to docs/; a page renamed or a heading reworded would
otherwise leave a dead link that nobody notices until a newcomer clicks it."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

import pytest
from django.core.management import get_commands

from tests.support.docs_support import ROOT, Link, anchors, documentation_pages, heading_anchor, links

_MANAGE_COMMAND = re.compile(r"manage\.py\s+(?P<command>[a-z_]+)")


def _relative_links() -> list[Link]:
    return [
        link
        for page in documentation_pages()
        for link in links(page)
        if not urlsplit(link.target).scheme and not link.target.startswith("mailto:")
    ]


def _link_id(link: Link) -> str:
    return f"{link.page.relative_to(ROOT)} -> {link.target}"


def test_the_pages_link_to_each_other():
    # Guards the link test below against passing on nothing (a parser that finds no link).
    targets = {link.target.split("#")[0] for link in _relative_links()}
    assert {"docs/running.md", "docs/troubleshooting.md", "docs/settings.md"} <= targets


@pytest.mark.parametrize("link", _relative_links(), ids=_link_id)
def test_every_relative_link_reaches_a_file_and_its_heading(link: Link):
    path, _, fragment = link.target.partition("#")
    target = (link.page.parent / unquote(path)).resolve() if path else link.page
    assert target.exists(), f"{link.target} (from {link.page.name}) is not a file in the repository"
    assert ROOT in target.parents or target == ROOT, f"{link.target} leaves the repository"
    if fragment:
        assert target.suffix == ".md", f"{link.target}: an anchor into a file that has no headings"
        assert fragment in anchors(target), (
            f"{link.target} (from {link.page.name}): no heading makes #{fragment}; "
            f"{target.name} has {sorted(anchors(target))}"
        )


def test_the_anchor_of_a_heading_is_githubs():
    assert heading_anchor("Operator tokens: `manage.py mcp_token`") == "operator-tokens-managepy-mcp_token"
    assert heading_anchor("A client's sign-in fails with `invalid_redirect_uri`") == (
        "a-clients-sign-in-fails-with-invalid_redirect_uri"
    )
    assert heading_anchor("Production (behind a TLS proxy)") == "production-behind-a-tls-proxy"


def _documented_commands() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for page in documentation_pages():
        for match in _MANAGE_COMMAND.finditer(page.read_text()):
            found.setdefault(match["command"], set()).add(page.name)
    return found


def test_every_manage_py_command_the_documentation_names_exists():
    documented = _documented_commands()
    assert {"mcp_token", "createsuperuser", "changepassword"} <= documented.keys()

    commands = get_commands()
    unknown = {command: sorted(pages) for command, pages in documented.items() if command not in commands}

    assert not unknown, f"manage.py commands named in the documentation that do not exist: {unknown}"
