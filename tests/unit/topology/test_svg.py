"""The topology picture: drawn on the server twice (layers as columns for
wide screens, as rows for phones), each scaling to its container, with every
executor's name beside its own arrow, clear of the boxes and the other arrows."""

from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path

import pytest
from django.test import Client

import portal.topology
from portal.topology import svg, svg_geometry, svg_layout
from portal.topology.topologyfile import sync_topology_file
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db

DEMO = Path(portal.topology.__file__).parent / "demo_topology.yaml"


def _crosses_box(edge: svg_geometry.Edge, box: svg_geometry.Rect) -> bool:
    inside = box.grown(-1)  # an arrow may touch the side it leaves or enters
    return any(inside.crosses(a, b) for a, b in edge.segments)


def assert_readable(picture: svg_geometry.Layout) -> None:
    labels = [edge.label_box for edge in picture.edges]
    for edge in picture.edges:
        label = edge.label_box
        for name, box in picture.boxes.items():
            assert not label.overlaps(box), f"{edge.label} is on the {name} box"
            if name not in (edge.source, edge.destination):
                assert not _crosses_box(edge, box), f"{edge.label}'s arrow goes through the {name} box"
        for other in picture.edges:
            assert not any(label.crosses(a, b) for a, b in other.segments), (
                f"{edge.label} is on the arrow of {other.label}"
            )
    for a, b in combinations(labels, 2):
        assert not a.overlaps(b)


def test_the_demo_topology_has_every_label_beside_its_own_arrow(client: Client, owner):
    sync_topology_file(DEMO)
    names, _kinds, capabilities = svg.current_topology()
    wide, narrow = (
        svg_layout.layout(names, capabilities, across=False),
        svg_layout.layout(names, capabilities, across=True),
    )
    for picture in (wide, narrow):
        assert_readable(picture)
    # spark-local-replicate reads in full between lake and archive, off both boxes.
    replicate = next(e for e in wide.edges if e.executor == "spark-local-replicate")
    assert (
        wide.boxes["lake"].right < replicate.label_box.x < replicate.label_box.right < wide.boxes["archive"].x
    )
    # On a phone the picture is about as wide as the screen: shown at (nearly) full size.
    assert narrow.bounds.w <= 340 < wide.bounds.w

    client.force_login(owner)
    html = client.get("/topology/").content.decode()
    pictures = re.findall(r"<svg [^>]*>", html)
    assert [re.search(r'class="topology-graph (\w+)"', p).group(1) for p in pictures] == ["wide", "narrow"]
    for tag in pictures:
        assert re.search(r'viewBox="-?\d+ -?\d+ \d+ \d+"', tag) and 'role="img"' in tag
    assert html.count(">spark-local-ingest</text>") == 2  # its one arrow, in each picture
    assert "spark-local-replicate: lake → archive" in html  # the description a screen reader gets


def test_an_arrow_skipping_a_layer_goes_round_the_boxes_between(owner):
    nodes("landing", "lake", "archive")
    executor("ingest", "landing>lake")
    executor("replicate", "lake>archive")
    executor("direct", "landing>archive")
    names, _kinds, capabilities = svg.current_topology()
    for across in (False, True):
        assert_readable(svg_layout.layout(names, capabilities, across=across))


def test_a_cycle_is_drawn_against_the_flow_with_its_arrowhead_at_the_start(owner):
    nodes("landing", "lake", "archive")
    executor("ingest", "landing>lake")
    executor("replicate", "lake>archive")
    executor("restore", "archive>lake", enabled=False)
    names, _kinds, capabilities = svg.current_topology()
    picture = svg_layout.layout(names, capabilities, across=False)
    assert_readable(picture)
    restore = next(e for e in picture.edges if e.executor == "restore")
    assert restore.reversed and restore.label == "restore (off)"
    drawn = svg.topology_svg()
    assert 'stroke-dasharray="5 4" marker-start="url(#topology-arrow-wide)"' in drawn
    # A node onto itself (the services refuse it, the drawing copes): a small loop.
    for across in (False, True):
        looped = svg_layout.layout(names, [*capabilities, ("lake", "lake", "compact", True)], across=across)
        assert_readable(looped)
