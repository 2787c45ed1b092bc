"""A client that asks `/api/` itself gets an index of the API (its docs, its schema and one
address per resource), not a 404; like every resource, only when signed in."""

from __future__ import annotations

import pytest

from tests.builders.api import api_client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_the_api_root_names_the_docs_the_schema_and_each_resource():
    answer = api_client_for(UserFactory(username="olivia")).get("/api/")
    assert answer.status_code == 200
    index = answer.json()
    assert index["docs"] == "http://testserver/api/docs/"
    assert index["schema"] == "http://testserver/api/schema/"
    resources = index["resources"]
    assert resources["flowconfigs"] == "http://testserver/api/flowconfigs"
    assert {"flowexecutions", "templatepacks", "datanodes"} <= set(resources)
    assert "schema" not in resources and "docs" not in resources
    for name, address in resources.items():  # each one answers (a list, or its own index)
        assert api_client_for(UserFactory(username=f"u-{name}")).get(address).status_code != 404, name


def test_the_api_root_wants_a_sign_in(client):
    assert client.get("/api/").status_code == 401
