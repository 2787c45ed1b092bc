"""Stories of reading a pack's versions: one as it was, any two compared, and
the flows behind "Used by N flows"."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.templatepacks import services
from tests.factories import FlowConfigFactory, UserFactory
from tests.unit.templatepacks.factories import JDBC_TEMPLATE, SALES_TEMPLATES, make_pack

pytestmark = pytest.mark.django_db


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def three_versions(owner, reader):
    """v1 as uploaded; v2 changes the jdbc template; v3 adds one; v4 drops old.template."""
    pack = make_pack(owner, readers=[reader], templates={**SALES_TEMPLATES, "old.template": "a = 1\n"})
    jdbc = JDBC_TEMPLATE + "extract.limit = 10\n"
    services.save_template(pack, user=owner, path="ingest/jdbc.template", text=jdbc)
    pack.refresh_from_db()  # the services lock and re-read the pack: ours is one version behind
    services.save_template(pack, user=owner, path="ingest/files.template", text="source.files.format = csv\n")
    pack.refresh_from_db()
    services.delete_template(pack, user=owner, path="old.template")
    pack.refresh_from_db()
    return pack


def test_a_reader_opens_an_old_version_and_reads_its_templates_as_they_were(three_versions, reader):
    page = _browser(reader).get("/packs/sales-pack/versions/1/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "pack://sales-pack/base.template" in html and "ingest/files.template" not in html
    assert "/packs/sales-pack/templates/ingest/jdbc.template?version=1" in html
    old = _browser(reader).get("/packs/sales-pack/templates/ingest/jdbc.template?version=1").content.decode()
    assert "extract.limit" not in old
    assert _browser(reader).get("/packs/sales-pack/versions/99/").status_code == 404


def test_any_two_versions_compare_with_what_was_added_removed_and_changed(three_versions, reader):
    html = _browser(reader).get("/packs/sales-pack/compare/?from=1&to=4").content.decode()
    assert 'id="comparison"' in html
    assert (
        '<span class="badge compiled">added</span> <a href="/packs/sales-pack/templates/ingest/files.template?version=4">'
        in html
    )
    assert '<span class="badge failed">removed</span>' in html and "<code>old.template</code>" in html
    assert '<span class="badge pending">changed</span>' in html
    assert '<span class="diff-add">+extract.limit = 10</span>' in html
    # Backwards: what a roll-back from v4 to v2 would undo.
    back = _browser(reader).get("/packs/sales-pack/compare/?from=4&to=2").content.decode()
    assert '<span class="diff-del">-source.files.format = csv</span>' in back
    same = _browser(reader).get("/packs/sales-pack/compare/?from=3&to=3").content.decode()
    assert "The two versions hold the same templates" in same


def test_a_bad_comparison_says_which_version_is_wrong(three_versions, reader):
    response = _browser(reader).get("/packs/sales-pack/compare/?from=one&to=2")
    assert response.status_code == 400
    assert "“from” must be a version number, got &#x27;one&#x27;." in response.content.decode()
    assert _browser(reader).get("/packs/sales-pack/compare/?from=1&to=42").status_code == 404


def test_an_outsider_sees_no_version_of_a_pack_they_cannot_read(three_versions):
    outsider = _browser(UserFactory())
    assert outsider.get("/packs/sales-pack/versions/1/").status_code == 404
    assert outsider.get("/packs/sales-pack/compare/?from=1&to=2").status_code == 404
    assert outsider.get("/packs/sales-pack/flows/").status_code == 404


def test_the_pack_page_links_versions_a_comparison_and_the_flows_using_it(three_versions, owner, reader):
    FlowConfigFactory(
        flow_group="sales",
        flow_name="orders",
        owner=owner,
        template_uris="pack://sales-pack/ingest/jdbc.template",
    )
    FlowConfigFactory(
        flow_group="sales",
        flow_name="paused",
        owner=owner,
        paused=True,
        template_uris="pack://sales-pack/ingest/files.template",
    )
    FlowConfigFactory(flow_group="other", flow_name="x", owner=owner, template_uris="pack://other/a.template")
    html = _browser(reader).get("/packs/sales-pack/").content.decode()
    assert '<a href="/packs/sales-pack/flows/" id="used-by">Used by 2 flows</a>' in html
    assert '<a href="/packs/sales-pack/versions/2/">v2</a>' in html
    assert 'action="/packs/sales-pack/compare/"' in html

    listing = _browser(reader).get("/packs/sales-pack/flows/").content.decode()
    assert "/flows/sales/orders/" in listing and "/flows/sales/paused/" in listing
    assert "/flows/other/x/" not in listing
    assert 'class="badge paused"' in listing


def test_the_flows_page_costs_the_same_queries_for_many_flows(pack, owner, reader):
    browser = _browser(reader)
    FlowConfigFactory(owner=owner, template_uris="pack://sales-pack/ingest/jdbc.template")
    with CaptureQueriesContext(connection) as few:
        browser.get("/packs/sales-pack/flows/")
    for _ in range(20):
        FlowConfigFactory(owner=UserFactory(), template_uris="pack://sales-pack/ingest/jdbc.template")
    with CaptureQueriesContext(connection) as many:
        browser.get("/packs/sales-pack/flows/")
    assert len(many.captured_queries) == len(few.captured_queries)
