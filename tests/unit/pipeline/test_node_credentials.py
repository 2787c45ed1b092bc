"""A user registers a database node with its user and password and builds a flow over it without
typing them again: the job connects as the node says, unless the flow names its own account."""

from __future__ import annotations

from portal.pipeline.jobspec import JobSpec

NODE_SOURCE = {
    "flowport.hop.source.kind": "jdbc",
    "flowport.hop.source.url": "jdbc:postgresql://127.0.0.1:5432/shop",
    "flowport.hop.source.user": "shop",
    "flowport.hop.source.password": "decrypted-by-the-worker",
}


def _props(properties: dict[str, str]):
    return JobSpec(job_name="j", properties=properties).props


def test_a_source_node_gives_its_account_to_the_job():
    props = _props(NODE_SOURCE)
    assert props.get("source.conn.username") == "shop"
    assert props.get("source.conn.password") == "decrypted-by-the-worker"


def test_a_destination_node_gives_its_account_to_the_writer():
    props = _props(
        {
            "flowport.hop.destination.kind": "jdbc",
            "flowport.hop.destination.user": "lake",
            "flowport.hop.destination.password": "pw",
        }
    )
    assert props.get("writer.jdbc.username") == "lake" and props.get("writer.jdbc.password") == "pw"


def test_the_flows_own_account_is_kept_whole():
    props = _props({**NODE_SOURCE, "source.conn.username": "reporting"})
    assert props.get("source.conn.username") == "reporting"
    assert props.get("source.conn.password") is None  # never the node's password for another user


def test_a_files_node_gives_nothing():
    props = _props({"flowport.hop.source.kind": "files", "flowport.hop.source.user": "x"})
    assert props.get("source.conn.username") is None
