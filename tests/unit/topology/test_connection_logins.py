"""Test connection logs in as a flow over the node would: a node whose URL carries a login (in
any spelling its driver reads, ``User=`` too) keeps it, and a typed one serves only a node
without an account."""

from portal.topology import connections
from portal.topology.models import DataNode


def test_a_login_in_the_url_in_any_spelling_is_not_replaced_by_a_typed_one():
    node = DataNode(name="n", kind="jdbc", properties={"url": "jdbc:mariadb://db/shop?User=etl"})
    assert connections._credentials(node, node.properties["url"], "root", "typed") == ("etl", "")


def test_a_node_without_an_account_takes_the_typed_one():
    bare = DataNode(name="m", kind="jdbc", properties={"url": "jdbc:mariadb://db/shop"})
    assert connections._credentials(bare, bare.properties["url"], "root", "typed") == ("root", "typed")
