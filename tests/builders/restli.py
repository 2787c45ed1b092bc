"""A Rest.li FlowConfig record the Gobblin clients' stories send, and the client that sends it as
they put it on the wire."""

from __future__ import annotations

import base64
import json
from urllib.parse import unquote

from django.test import Client

from tests.factories import PASSWORD

RESTLI_2 = {"HTTP_X_RESTLI_PROTOCOL_VERSION": "2.0.0"}


def flow_config(**overrides) -> dict:
    record = {
        "id": {"flowGroup": "team", "flowName": "nightly"},
        "schedule": {"cronSchedule": "0 0 2 * * ?", "runImmediately": False},
        "templateUris": "FS:///mytemplate.template",
        "properties": {
            "gobblin.flow.sourceIdentifier": "pg-sales",
            "gobblin.flow.destinationIdentifier": "lake",
            **RUNNABLE,
        },
    }
    record.update(overrides)
    return record


# What the JDBC source of pg-sales reads (a save refuses a flow the pipeline would refuse).
RUNNABLE = {"source.jdbc.tables": "orders", "extract.is.full": "true"}


class Wire:
    """An HTTP client that sends what a Rest.li client sends: the raw URL (as
    gunicorn hands it over in RAW_URI), the protocol header, the Rest.li
    method header and a JSON body, signed in with HTTP Basic."""

    def __init__(self, user) -> None:
        self.client = Client()
        self.auth = {}
        if user is not None:
            token = base64.b64encode(f"{user.username}:{PASSWORD}".encode()).decode()
            self.auth = {"HTTP_AUTHORIZATION": f"Basic {token}"}

    def send(self, method: str, url: str, body=None, restli_method: str | None = None, headers=None):
        extra = {**RESTLI_2, **self.auth, "RAW_URI": url}
        if restli_method:
            extra["HTTP_X_RESTLI_METHOD"] = restli_method
        extra.update(headers or {})
        path, _, query = url.partition("?")
        extra["QUERY_STRING"] = query
        data = json.dumps(body) if body is not None else ""
        return self.client.generic(method, unquote(path), data, content_type="application/json", **extra)
