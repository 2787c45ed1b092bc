"""A Gobblin team moving to Flowport: the packs and topology their flows use,
and a way to send requests exactly as Gobblin's clients put them on the wire."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.builders.flows import make_topology_nodes
from tests.factories import PASSWORD
from tests.unit.templatepacks.factories import make_pack

RESTLI_2 = {"HTTP_X_RESTLI_PROTOCOL_VERSION": "2.0.0"}


@pytest.fixture
def packs(owner):
    """GaaS's FS:///mytemplate.template, and a pack with a Gobblin-style template."""
    make_pack(owner, "seed", {"mytemplate.template": "a = 1"})
    make_pack(
        owner,
        "gobblin",
        {"distcp.template": 'gobblin.template.required_attributes = "from,to"\ncopy.from = ${from}\n'},
    )


@pytest.fixture(autouse=True)
def topology(db):
    """The data nodes the flows name: a save refuses a name that is no data node."""
    make_topology_nodes()


class Wire:
    """An HTTP client that sends what a Rest.li client sends: the raw URL (as
    gunicorn hands it over in RAW_URI), the protocol header, the Rest.li
    method header and a JSON body, signed in with HTTP Basic."""

    def __init__(self, user) -> None:
        self.client = Client()
        self.auth = {}
        if user is not None:
            import base64

            token = base64.b64encode(f"{user.username}:{PASSWORD}".encode()).decode()
            self.auth = {"HTTP_AUTHORIZATION": f"Basic {token}"}

    def send(self, method: str, url: str, body=None, restli_method: str | None = None, headers=None):
        extra = {**RESTLI_2, **self.auth, "RAW_URI": url}
        if restli_method:
            extra["HTTP_X_RESTLI_METHOD"] = restli_method
        extra.update(headers or {})
        path, _, query = url.partition("?")
        from urllib.parse import unquote

        extra["QUERY_STRING"] = query
        data = json.dumps(body) if body is not None else ""
        return self.client.generic(method, unquote(path), data, content_type="application/json", **extra)


@pytest.fixture
def wire(owner):
    return Wire(owner)
