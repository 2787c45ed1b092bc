"""A user registers a database node with its user and password and builds a flow over it without
typing them again: the job connects as the node says. A flow names its own account only for a node
without one: a reader of a node may not choose who the database takes it for (issue #46, a reader
naming `postgres` on a server that trusts the workers)."""

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


def test_a_node_with_an_account_gives_it_whatever_the_flow_says():
    props = _props({**NODE_SOURCE, "source.conn.username": "postgres", "source.conn.password": ""})
    assert props.get("source.conn.username") == "shop"
    assert props.get("source.conn.password") == "decrypted-by-the-worker"
    only_user = {k: v for k, v in NODE_SOURCE.items() if not k.endswith("password")}
    props = _props({**only_user, "source.conn.username": "postgres", "source.conn.password": "guess"})
    assert props.get("source.conn.username") == "shop" and props.get("source.conn.password") is None


def test_the_flows_own_account_is_kept_whole_on_a_node_without_one():
    bare = {k: v for k, v in NODE_SOURCE.items() if not k.endswith(("user", "password"))}
    props = _props({**bare, "source.conn.username": "reporting", "source.conn.password": "its-own"})
    assert props.get("source.conn.username") == "reporting"
    assert props.get("source.conn.password") == "its-own"


def test_a_files_node_gives_nothing():
    props = _props({"flowport.hop.source.kind": "files", "flowport.hop.source.user": "x"})
    assert props.get("source.conn.username") is None


def test_a_branch_writer_key_does_not_choose_the_destination_login():
    """attacker2: `writer.jdbc.username.0` is what branch 0's writer reads first."""
    spec = {
        "flowport.hop.destination.kind": "jdbc",
        "flowport.hop.destination.user": "lake",
        "flowport.hop.destination.password": "pw",
        "writer.jdbc.username.0": "postgres",
        "writer.jdbc.password.0": "other",
    }
    branch = _props(spec).for_branch(0, 1, "fork_0")
    assert branch.get("writer.jdbc.username") == "lake" and branch.get("writer.jdbc.password") == "pw"


def test_a_login_in_the_node_url_is_the_node_account():
    """attacker2: an administrator's node keeping its user in the URL; libpq would take the flow's."""
    props = _props(
        {
            "flowport.hop.source.kind": "jdbc",
            "flowport.hop.source.url": "jdbc:postgresql://127.0.0.1:5432/shop?user=reader",
            "source.conn.username": "postgres",
        }
    )
    assert props.get("source.conn.username") is None
