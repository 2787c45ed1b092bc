"""A compiled job's properties as anyone who may see the flow sees them: a hop node's connection
masked as the node's own page masks it for one who is not its owner."""

from __future__ import annotations

from portal.flows.shown import shown_property


def test_a_login_kept_in_a_hop_url_is_masked():
    shown = shown_property("flowport.hop.source.url", "jdbc:postgresql://db:5432/shop?user=reader")
    assert "reader" not in str(shown) and "db:5432/shop" in str(shown)


def test_a_hop_nodes_account_and_encrypted_values_are_masked():
    assert shown_property("flowport.hop.destination.user", "writer") == "********"
    assert "ENC(" not in str(shown_property("flowport.hop.destination.password", "ENC(djE6eA==)")).replace(
        "ENC(…)", ""
    )
    assert shown_property("source.jdbc.tables", "public.orders") == "public.orders"
