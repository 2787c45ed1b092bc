"""A newcomer who signs in lands on the dashboard: until they own a flow, it opens with what to do
first, each step linked and the ones done ticked; once they have a flow, it is gone."""

from __future__ import annotations

import pytest

from portal.topology import services as topology
from tests.factories import FlowConfigFactory

pytestmark = pytest.mark.django_db


def test_a_newcomer_sees_the_first_steps_until_they_own_a_flow(client, owner):
    client.force_login(owner)
    page = client.get("/monitoring/").content.decode()
    steps = page[page.index('id="first-steps"') :]
    assert 'href="/topology/datanodes/new/">Register your database or folder</a>' in steps
    assert 'href="/flows/new/">Create the flow</a>' in steps and "Test connection" in steps
    assert '<li class="done">' not in steps

    topology.create_data_node(
        {"name": "my-folder", "kind": "files", "properties": {"path": "users/olivia/in"}}, user=owner
    )
    steps = client.get("/monitoring/").content.decode()
    assert (
        '<li class="done"><span aria-hidden="true">✓</span> <span class="visually-hidden">Done: </span>'
        in (steps)
    )

    FlowConfigFactory(owner=owner)
    assert 'id="first-steps"' not in client.get("/monitoring/").content.decode()


def test_the_refreshing_part_does_not_repeat_them(client, owner):
    client.force_login(owner)
    assert (
        'id="first-steps"' not in client.get("/monitoring/", headers={"HX-Request": "true"}).content.decode()
    )
