"""The raw-parameter check behind the OAuth endpoints' and the sign-in page's NUL and UTF-8
refusals (``oauth.parameter_guard``), case by case; the endpoints themselves are tested through
Daphne in ``tests/e2e/oauth/test_oauth_hostile_parameters.py``."""

from __future__ import annotations

import base64

import pytest
from django.test import Client, RequestFactory

from oauth.parameter_guard import FORM_UNREADABLE, PARAMETER_NAME_UNSAFE, request_unsafe_parameter

FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize(
    ("query", "body", "expected"),
    [
        ("client_id=abc&state=%C3%A9t%C3%A9", b"code=abc+def&x=%E2%82%AC", None),
        ("client_id=a%00b", b"", "The 'client_id' parameter contains a NUL character."),
        ("", b"code=a%ffb", "The 'code' parameter is not valid UTF-8."),
        ("", b"code=a\xffb", "The 'code' parameter is not valid UTF-8."),
        ("", b"password=%ed%a0%80", "The 'password' parameter is not valid UTF-8."),
        ("a%00=1", b"", PARAMETER_NAME_UNSAFE),
        ("", b"&&code=ok&", None),
    ],
)
def test_it_names_the_first_unusable_parameter(query, body, expected):
    request = RequestFactory().post(f"/oauth/token/?{query}", data=body, content_type=FORM)
    assert request_unsafe_parameter(request) == expected


def test_it_checks_http_basic_client_credentials():
    credentials = base64.b64encode(b"client%00id:secret").decode()
    request = RequestFactory().post(
        "/oauth/token/", data=b"", content_type=FORM, HTTP_AUTHORIZATION=f"Basic {credentials}"
    )
    assert request_unsafe_parameter(request) == "The 'client_id' parameter contains a NUL character."


@pytest.mark.django_db
def test_an_unreadable_multipart_body_is_an_oauth_invalid_request(client: Client):
    response = client.generic("POST", "/oauth/token/", b"code=abc", content_type="multipart/form-data")
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request", "error_description": FORM_UNREADABLE}


@pytest.mark.django_db
def test_an_oversize_or_many_field_token_request_is_an_oauth_invalid_request(client: Client, settings):
    """Django's own answer to both is its HTML 400 page; the token endpoint answers JSON."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    oversize = client.post("/oauth/token/", data=b"code=" + b"c" * 2000, content_type=FORM)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    many = client.post("/oauth/token/", data=b"&".join(b"f%d=1" % n for n in range(1100)), content_type=FORM)

    assert (oversize.status_code, oversize.json()["error"]) == (400, "invalid_request")
    assert "1000 bytes" in oversize.json()["error_description"]
    assert (many.status_code, many.json()["error"]) == (400, "invalid_request")
    assert "too many fields" in many.json()["error_description"]


@pytest.mark.django_db
def test_an_oversize_sign_in_form_goes_back_to_the_form_saying_why(client: Client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = client.post(
        "/accounts/login/?next=/accounts/connected/",
        data=b"username=alice&password=" + b"p" * 2000,
        content_type=FORM,
        follow=True,
    )

    assert response.redirect_chain == [("/accounts/login/?next=/accounts/connected/", 302)]
    assert "The form is too large (1000 bytes at most)." in response.content.decode()
