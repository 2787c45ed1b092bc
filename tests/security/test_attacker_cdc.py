"""Mallory tries change data capture on the portal's own database:
a replication slot there would pin the portal's log and a publication would stream its tables (users,
sessions, keys) to her. Her cdc flow over a node spelling the portal's database in a way no text check
knows is refused where the connection lands: the job FAILED before any statement, no slot and no
publication made. Deleting a flow whose source became the portal's database drops nothing there."""

from __future__ import annotations

import logging

import pytest
from django.db import connection

from portal.orchestration.control import cdc
from portal.topology.models import DataNode
from tests.builders.attacker_databases import LANDED, run_the_world, spellings
from tests.builders.attacker_databases import blind_text_check as blind_text_check  # fixture
from tests.builders.world import World, files_under

CDC = "portal.pipeline.sources.cdc.CdcSource"
# Slots and publications in the portal's own PostgreSQL database (SQLite has neither).
pytestmark = pytest.mark.postgres


def _publications_and_slots() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_publication")
        publications = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM pg_replication_slots")
        slots = cursor.fetchone()[0]
    return publications, slots


def _capturing(world: World, url: str) -> None:
    DataNode.objects.filter(name="landing").update(kind="jdbc", properties={"url": url})
    world.mallory_flow.properties = {
        "source.class": CDC,
        "source.cdc.tables": "public.auth_user",
        "source.conn.username": connection.settings_dict["USER"] or "postgres",
        "writer.output.format": "csv",
    }
    world.mallory_flow.save(update_fields=["properties"])


def test_a_cdc_flow_at_the_portals_database_is_refused_where_the_connection_lands(
    transactional_db,
    world: World,
    blind_text_check,
):
    before = _publications_and_slots()
    _capturing(world, spellings()["a PGDBNAME parameter"])
    job = run_the_world(world)
    assert job.status == "FAILED", job.message
    assert f"data node 'landing': {LANDED}" in job.message
    assert _publications_and_slots() == before
    assert files_under(world.lake / "mal") == []


def test_deleting_a_flow_drops_no_slot_in_the_portals_database(transactional_db, world: World, caplog):
    props = {
        "source.class": CDC,
        "source.jdbc.url": spellings()["host= and dbname= parameters"],
        "source.conn.username": connection.settings_dict["USER"] or "postgres",
    }
    with caplog.at_level(logging.WARNING, logger="portal.orchestration.control.cdc"):
        dropped = cdc.drop_capture("fp_cdc_1_0123456789ab", props, "mal/grab")
    assert dropped == []
    assert "was NOT dropped" in caplog.text and LANDED in caplog.text
