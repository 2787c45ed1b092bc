"""The topology picture: a server-side SVG, no JavaScript library.

Data nodes are boxes laid out in columns by their distance from nodes no
edge enters (sources of data); each capability is an arrow labelled with
its executor. Disabled/unhealthy executors' edges are dashed.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape

from portal.topology.models import Capability, DataNode

BOX_W, BOX_H, COL_GAP, ROW_GAP, MARGIN = 150, 40, 110, 34, 20
MAX_NODES = 150


def _columns(names: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layering, bounded so cycles cannot loop forever."""
    incoming = defaultdict(set)
    for source, destination in edges:
        incoming[destination].add(source)
    column = {name: 0 for name in names}
    for _ in range(len(names)):
        moved = False
        for source, destination in edges:
            if (
                destination in column
                and source in column
                and column[destination] < column[source] + 1 < len(names)
            ):
                column[destination] = column[source] + 1
                moved = True
        if not moved:
            break
    return column


def topology_svg() -> str:
    nodes = list(DataNode.objects.values_list("name", "kind"))
    if not nodes:
        return ""
    if len(nodes) > MAX_NODES:
        return (
            f'<p class="muted">The topology has {len(nodes)} data nodes; the picture is drawn '
            f"for up to {MAX_NODES}. Use the tables below.</p>"
        )
    capabilities = list(
        Capability.objects.values_list(
            "source__name",
            "destination__name",
            "executor__name",
            "executor__enabled",
            "executor__health_status",
        )
    )
    names = [name for name, _kind in nodes]
    column = _columns(names, [(s, d) for s, d, *_ in capabilities])
    rows: dict[int, list[str]] = defaultdict(list)
    for name in names:
        rows[column[name]].append(name)
    position = {}
    for col, members in rows.items():
        for row, name in enumerate(members):
            position[name] = (MARGIN + col * (BOX_W + COL_GAP), MARGIN + row * (BOX_H + ROW_GAP))
    width = MARGIN * 2 + (max(rows) + 1) * (BOX_W + COL_GAP) - COL_GAP
    height = MARGIN * 2 + max(len(m) for m in rows.values()) * (BOX_H + ROW_GAP) - ROW_GAP
    kinds = dict(nodes)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="topology-graph" role="img" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-labelledby="topology-graph-title">',
        f'<title id="topology-graph-title">Topology: {len(nodes)} data nodes, {len(capabilities)} capabilities</title>',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#1f5fbf"/></marker></defs>',
    ]
    pair_count: dict[tuple[str, str], int] = defaultdict(int)
    for source, destination, executor, enabled, health in capabilities:
        (x1, y1), (x2, y2) = position[source], position[destination]
        offset = pair_count[(source, destination)] * 14
        pair_count[(source, destination)] += 1
        if x2 > x1:
            sx, sy, ex, ey = x1 + BOX_W, y1 + BOX_H / 2, x2, y2 + BOX_H / 2
        else:  # same or earlier column: loop around below the boxes
            sx, sy, ex, ey = x1 + BOX_W / 2, y1 + BOX_H, x2 + BOX_W / 2, y2 + BOX_H
        mx, my = (sx + ex) / 2, (sy + ey) / 2 - 6 - offset + (30 if x2 <= x1 else 0)
        usable = enabled and health != "UNHEALTHY"
        dash = "" if usable else ' stroke-dasharray="5 4"'
        label = escape(executor) + ("" if usable else " (off)")
        parts.append(
            f'<g class="edge"><title>{escape(executor)}: {escape(source)} → {escape(destination)}</title>'
            f'<path d="M{sx},{sy} Q{mx},{my + (0 if x2 > x1 else 20)} {ex},{ey}" fill="none" '
            f'stroke="#1f5fbf" stroke-width="1.5"{dash} marker-end="url(#arrow)"/>'
            f'<text x="{mx}" y="{my}" font-size="11" text-anchor="middle" fill="#14233c">{label}</text></g>'
        )
    for name in names:
        x, y = position[name]
        parts.append(
            f'<g class="node"><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" '
            f'fill="#eef1f6" stroke="#5a6372"/>'
            f'<text x="{x + BOX_W / 2}" y="{y + 17}" font-size="13" font-weight="600" text-anchor="middle">'
            f"{escape(name)}</text>"
            f'<text x="{x + BOX_W / 2}" y="{y + 32}" font-size="11" text-anchor="middle" fill="#5a6372">'
            f"{escape(kinds[name])}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)
