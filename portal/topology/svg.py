"""The topology picture: a server-side SVG, no JavaScript library.

Each capability is an arrow labelled with its executor, on a white halo;
disabled/unhealthy executors' edges are dashed. The picture is drawn twice:
layers as columns, left to right, for wide screens, and layers as rows, top
down, for phones (the stylesheet shows one of them). Both scale down to their
container through their viewBox. `svg_layout.layout()` is the geometry.
"""

from __future__ import annotations

from html import escape

from django.utils.safestring import SafeString, mark_safe

from portal.topology.models import Capability, DataNode
from portal.topology.svg_geometry import LABEL_FONT, LABEL_PAD, Layout
from portal.topology.svg_layout import layout

MAX_NODES = 150


def _svg(picture: Layout, kinds: dict[str, str], which: str) -> str:
    view = picture.bounds
    width, height = round(view.w), round(view.h)
    title_id, desc_id, arrow = (
        f"topology-graph-{which}-title",
        f"topology-graph-{which}-desc",
        f"topology-arrow-{which}",
    )
    described = "; ".join(f"{e.executor}: {e.source} → {e.destination}" for e in picture.edges)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="topology-graph {which}" role="img" '
        f'viewBox="{view.x:.0f} {view.y:.0f} {width} {height}" width="{width}" height="{height}" '
        f'aria-labelledby="{title_id}" aria-describedby="{desc_id}">',
        f'<title id="{title_id}">Topology: {len(picture.boxes)} data nodes, {len(picture.edges)} capabilities</title>',
        f'<desc id="{desc_id}">{escape(described) if described else "No capabilities."}</desc>',
        f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#1f5fbf"/></marker></defs>',
    ]
    for edge in picture.edges:
        dash = "" if edge.usable else ' stroke-dasharray="5 4"'
        head = "marker-start" if edge.reversed else "marker-end"
        parts.append(
            f'<g class="edge"><title>{escape(edge.executor)}: {escape(edge.source)} → {escape(edge.destination)}</title>'
            f'<path d="{edge.path}" fill="none" stroke="#1f5fbf" stroke-width="1.5"{dash} {head}="url(#{arrow})"/></g>'
        )
    for name, box in picture.boxes.items():
        cx = box.x + box.w / 2
        parts.append(
            f'<g class="node"><rect x="{box.x:g}" y="{box.y:g}" width="{box.w:g}" height="{box.h:g}" rx="6" '
            f'fill="#eef1f6" stroke="#5a6372"/>'
            f'<text x="{cx:g}" y="{box.y + 17:g}" font-size="13" font-weight="600" text-anchor="middle" fill="#1d2430">'
            f"{escape(name)}</text>"
            f'<text x="{cx:g}" y="{box.y + 32:g}" font-size="11" text-anchor="middle" fill="#5a6372">'
            f"{escape(kinds[name])}</text></g>"
        )
    for edge in picture.edges:  # on top of everything, on a white halo that hugs the letters
        room, anchor = edge.label_box, edge.label_anchor
        assert room is not None
        x = {"start": room.x + LABEL_PAD, "end": room.right - LABEL_PAD}.get(anchor, room.x + room.w / 2)
        parts.append(
            f'<text class="edge-label" x="{x:.1f}" y="{room.y + room.h / 2:.1f}" font-size="{LABEL_FONT}" '
            f'text-anchor="{anchor}" dominant-baseline="central" fill="#14233c" stroke="#fff" stroke-width="4" '
            f'stroke-linejoin="round" paint-order="stroke">{escape(edge.label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def current_topology() -> tuple[list[str], dict[str, str], list[tuple[str, str, str, bool]]]:
    """Node names, their kinds, and (source, destination, executor, usable) per capability."""
    nodes = list(
        DataNode.objects.filter(user_made=False).values_list("name", "kind")
    )  # users' own: not drawn
    capabilities = [
        (source, destination, executor, enabled and health != "UNHEALTHY")
        for source, destination, executor, enabled, health in Capability.objects.values_list(
            "source__name",
            "destination__name",
            "executor__name",
            "executor__enabled",
            "executor__health_status",
        )
    ]
    return [name for name, _kind in nodes], dict(nodes), capabilities


def topology_svg() -> SafeString:
    """Safe to put in a page as it is: every name is escaped as it is drawn."""
    names, kinds, capabilities = current_topology()
    if not names:
        return SafeString("")
    if len(names) > MAX_NODES:
        return SafeString(
            f'<p class="muted">The topology has {len(names)} data nodes; the picture is drawn '
            f"for up to {MAX_NODES}. Use the tables below.</p>"
        )
    return mark_safe(  # noqa: S308 - names escaped in _svg
        _svg(layout(names, capabilities, across=False), kinds, "wide")
        + _svg(layout(names, capabilities, across=True), kinds, "narrow")
    )
