"""Flows use only templates their owner can read; losing access flags them."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from portal.flows.models import FlowConfig
from portal.flows.packflows import flows_using_pack
from portal.templatepacks import services
from tests.factories import FlowConfigFactory

URI = "pack://sales-pack/ingest/jdbc.template"


def test_flows_using_pack_finds_pack_and_fs_uris(pack, reader, outsider):
    direct = FlowConfigFactory(owner=reader, template_uris=URI)
    by_path = FlowConfigFactory(owner=reader, template_uris="FS:///ingest/jdbc.template")
    FlowConfigFactory(owner=outsider, template_uris="")
    assert set(flows_using_pack(pack.name, services.template_paths(pack))) == {direct, by_path}


def test_removing_a_reader_flags_their_flow_and_restoring_unflags_it(pack, owner, reader):
    flow = FlowConfigFactory(owner=reader, template_uris=URI, compilation_status="COMPILED")

    services.set_acl(pack, user=owner, entries=[{"role": "owner", "user": "olivia"}])

    flow.refresh_from_db()
    assert flow.compilation_status == FlowConfig.Compilation.FAILED
    assert URI in flow.compilation_message and "will not run" in flow.compilation_message

    services.set_acl(
        pack, user=owner, entries=[{"role": "owner", "user": "olivia"}, {"role": "reader", "user": "rita"}]
    )

    flow.refresh_from_db()
    assert flow.compilation_status == FlowConfig.Compilation.PENDING


def test_deleting_the_pack_flags_flows_that_use_it(pack, owner, reader):
    flow = FlowConfigFactory(owner=reader, template_uris=URI)
    services.delete_pack(pack, user=owner)
    flow.refresh_from_db()
    assert flow.compilation_status == FlowConfig.Compilation.FAILED


def test_validate_template_uris_for_is_the_flow_owners_view(pack, reader, outsider):
    services.validate_template_uris_for(reader, [URI])
    try:
        services.validate_template_uris_for(outsider, [URI])
    except ValidationError as error:
        assert list(error.message_dict) == ["template_uris"]
    else:
        raise AssertionError("an outsider's flow must not use the pack")
