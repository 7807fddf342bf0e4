"""Every page names Gatehouse's icon, and /favicon.ico leads to it: no page costs a 404 in the
access log and the browser's console. Shown failing before: /favicon.ico was a 404 on every page."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db

ICON = "/static/gatehouse/favicon.svg"


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_pages_name_the_icon(client: Client, path: str):
    html = client.get(path).content.decode()
    assert f'<link rel="icon" href="{ICON}" type="image/svg+xml">' in html


def test_favicon_ico_leads_to_the_icon(client: Client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == ICON
    found = finders.find("gatehouse/favicon.svg")
    assert found is not None
    with open(found, encoding="utf-8") as icon:
        assert icon.read().startswith("<svg ")
