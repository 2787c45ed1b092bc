"""A wrong address gets an answer in the form the caller reads: a page with
the portal's navigation for a person, JSON for an API client."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from portal.errors import server_error
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client):
    client.force_login(UserFactory(username="olivia"))
    return client


def test_a_missing_page_keeps_the_site_navigation(signed_in):
    answer = signed_in.get("/flows/nope/nope/")
    assert answer.status_code == 404
    html = answer.content.decode()
    assert "<h1>Not found</h1>" in html and "/flows/nope/nope/" in html
    assert 'aria-label="Main"' in html and "olivia" in html


def test_an_api_client_gets_json_for_an_address_that_does_not_exist(signed_in):
    for url in ("/api/flowexecutions/abc", "/api/no-such-endpoint"):
        answer = signed_in.get(url)
        assert answer.status_code == 404, url
        assert answer["Content-Type"] == "application/json"
        assert answer.json() == {"detail": "Not found."}


def test_a_server_error_page_needs_nothing_from_the_request():
    page = server_error(RequestFactory().get("/flows/"))
    assert page.status_code == 500 and b"Something went wrong" in page.content
    api = server_error(RequestFactory().get("/api/flowconfigs"))
    assert api.status_code == 500 and b"portal log" in api.content


def test_the_browsers_favicon_request_finds_the_icon(client):
    answer = client.get("/favicon.ico")
    assert answer.status_code == 301
    assert client.get(answer["Location"]).status_code == 200


def test_a_refused_page_says_why_in_the_site_layout(client):
    """A non-staff user opens the page to add an executor: staff only."""
    client.force_login(UserFactory(username="oscar"))
    answer = client.get("/topology/executors/new/")
    assert answer.status_code == 403
    html = answer.content.decode()
    assert "<h1>Not allowed</h1>" in html and 'aria-label="Main"' in html and "oscar" in html
    assert "Only staff can change the topology." in html
