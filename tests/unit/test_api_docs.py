"""The API docs page works on a machine without Internet access: Swagger UI's
scripts and styles come from the portal itself, never from a CDN."""

from __future__ import annotations

import re

import pytest

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_swagger_ui_loads_every_asset_from_the_portal(client):
    client.force_login(UserFactory())
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', html)
    assert any("swagger-ui-bundle" in a for a in assets), assets
    for asset in assets:
        assert asset.startswith("/static/"), f"{asset} is not served by the portal"
        served = client.get(asset)
        assert served.status_code == 200, asset
        assert b"".join(served.streaming_content if served.streaming else [served.content])
