"""Where the topology picture's boxes, edges and labels go.

Data nodes are laid out in layers by their distance from nodes no edge
enters (sources of data). The geometry is worked out along the layers (u)
and across them (v), then turned into x, y for one orientation or the other.
An edge that skips layers passes through a gap kept for it in each layer
between, so no line crosses a box; an edge against the flow (a cycle) is laid
out reversed, its arrowhead at its start. Each label sits beside its own
edge: the place along the edge (the middle first) that touches no box, no
other label and no line, preferably on the side the edge bends away from and
within the boxes' span.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise

from portal.topology.svg_geometry import (
    ALONG,
    CLEARANCE,
    LABEL_GAP,
    LABEL_H,
    NARROW,
    PASSAGE,
    PORT_STEP,
    WIDE,
    Cubic,
    Edge,
    Layout,
    Point,
    Rect,
    label_width,
)

# --- layers ---------------------------------------------------------------------------------------


def _back_edges(names: list[str], pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Edges closing a cycle: laid out reversed. Found depth first, starting
    from the nodes more data leaves than enters, so the flow keeps its direction."""
    index = {name: i for i, name in enumerate(names)}
    out: defaultdict[str, list[str]] = defaultdict(list)
    balance: defaultdict[str, int] = defaultdict(int)
    for source, destination in sorted(pairs, key=lambda p: (index[p[0]], index[p[1]])):
        out[source].append(destination)
        balance[source] -= 1
        balance[destination] += 1
    state: dict[str, int] = {}  # 1 on the path, 2 done
    back = set()
    for root in sorted(names, key=lambda n: (balance[n], index[n])):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(out[root]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(out[child])))
    return back


def _layers(names: list[str], pairs: set[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layering of the acyclic (source, destination) pairs."""
    incoming = defaultdict(list)
    for source, destination in pairs:
        incoming[destination].append(source)
    layer: dict[str, int] = {}

    def depth(name: str) -> int:
        stack = [name]
        while stack:
            top = stack[-1]
            todo = [s for s in incoming[top] if s not in layer]
            if todo:
                stack.extend(todo)
                continue
            layer[top] = 1 + max((layer[s] for s in incoming[top]), default=-1)
            stack.pop()
        return layer[name]

    for name in names:
        depth(name)
    return layer


# --- the layout -------------------------------------------------------------------------------------


# A slot's key: a node's name, or (edge number, layer) for an edge's passage.
_Key = str | tuple[int, int]


@dataclass
class _Item:
    """One slot in a layer: a node's box, or a passage for an edge skipping the layer."""

    key: _Key
    size: float  # across the layer (v)
    v: float = 0.0  # where it starts across the layer

    @property
    def middle(self) -> float:
        return self.v + self.size / 2


def _order(layers: list[list[_Item]], links: list[tuple[_Key, _Key]]) -> None:
    """Fewer crossings: order each layer by the mean place of its neighbours
    in the layer before (sweeping down), then after (up), then before again."""
    down: defaultdict[_Key, list[_Key]] = defaultdict(list)
    up: defaultdict[_Key, list[_Key]] = defaultdict(list)
    for a, b in links:
        down[b].append(a)
        up[a].append(b)
    place = {item.key: i for row in layers for i, item in enumerate(row)}
    for neighbours, rows in ((down, layers[1:]), (up, layers[-2::-1]), (down, layers[1:])):
        for row in rows:
            first = {item.key: i for i, item in enumerate(row)}

            def mean(item: _Item, neighbours=neighbours, first=first) -> tuple[float, int]:
                near = [place[k] for k in neighbours[item.key]]
                return (sum(near) / len(near) if near else first[item.key], first[item.key])

            row.sort(key=mean)
            place.update({item.key: i for i, item in enumerate(row)})


def _ports(side: list[tuple[float, Edge, str]], length: float) -> dict[tuple[int, str], float]:
    """Spread the edges on one side of a box, in the order of their other ends."""
    side.sort(key=lambda m: (m[0], m[1].executor))
    step = min(PORT_STEP, length / (len(side) + 1))
    return {(id(edge), role): (i - (len(side) - 1) / 2) * step for i, (_v, edge, role) in enumerate(side)}


def _s_curve(a: Point, b: Point) -> Cubic:
    """From a to b along u, leaving and arriving square to the layers."""
    half = (b[0] - a[0]) / 2
    return (a, (a[0] + half, a[1]), (b[0] - half, b[1]), b)


def _swapped(curve: Cubic) -> Cubic:
    """The curve with u and v exchanged."""
    a, b, c, d = curve
    return ((a[1], a[0]), (b[1], b[0]), (c[1], c[0]), (d[1], d[0]))


def _straight(a: Point, b: Point) -> Cubic:
    return (a, (a[0] + (b[0] - a[0]) / 3, a[1] + (b[1] - a[1]) / 3), (a[0] + (b[0] - a[0]) * 2 / 3, b[1]), b)


def _label_places(edge: Edge, lu: float, lv: float) -> list[tuple[Rect, int, float]]:
    """Label rooms beside the edge (in u, v), best first: at the middle, then
    further along. With the side (-1 before the edge across the layers, +1
    after it) and a small cost for the side the edge bends towards: there,
    a label reads as the neighbouring edge's."""
    points = edge.points
    (_su, sv), (_eu, ev) = points[0], points[-1]
    sides = ((1, 0.0), (-1, 0.3)) if ev < sv else ((-1, 0.0), (1, 0.3))
    places = []
    for t in ALONG:
        pu, pv = edge.at(t)
        near = [v for u, v in points if pu - lu / 2 - LABEL_GAP <= u <= pu + lu / 2 + LABEL_GAP] or [pv]
        for side, extra in sides:
            v = max(near) + LABEL_GAP if side > 0 else min(near) - LABEL_GAP - lv
            places.append((Rect(pu - lu / 2, v, lu, lv), side, extra))
    return places


# What a grid cell holds: ("box" or "label", its Rect, None) or ("line", its Edge, the segment).
_Entry = tuple[str, Rect | Edge, tuple[Point, Point] | None]


class _Grid:
    """Boxes, labels and line segments by the square cells they touch, so a
    label room is checked against its neighbourhood, not the whole picture."""

    CELL = 48.0

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], list[_Entry]] = defaultdict(list)

    def _keys(self, left: float, top: float, right: float, bottom: float):
        c = self.CELL
        for i in range(int(left // c), int(right // c) + 1):
            for j in range(int(top // c), int(bottom // c) + 1):
                yield (i, j)

    def add_rect(self, kind: str, rect: Rect) -> None:
        for key in self._keys(rect.x, rect.y, rect.right, rect.bottom):
            self.cells[key].append((kind, rect, None))

    def add_segment(self, edge: Edge, a: Point, b: Point) -> None:
        for key in self._keys(min(a[0], b[0]), min(a[1], b[1]), max(a[0], b[0]), max(a[1], b[1])):
            self.cells[key].append(("line", edge, (a, b)))

    def near(self, rect: Rect) -> list[_Entry]:
        found: list[_Entry] = []
        seen: set[int] = set()
        for key in self._keys(rect.x, rect.y, rect.right, rect.bottom):
            for entry in self.cells.get(key, ()):
                if id(entry) not in seen:
                    seen.add(id(entry))
                    found.append(entry)
        return found


def _cost(place: Rect, grid: _Grid, hull: Rect, own: Edge) -> float:
    """How bad a label room is: on a box worst, then on a label, then on a
    line; and a little bad out to the side of all the boxes (a wider picture
    is smaller once scaled to a phone)."""
    guard = place.grown(CLEARANCE)
    cost = 0.0
    overhang = max(hull.y - place.y, place.bottom - hull.bottom)
    if overhang > 1:
        cost += 0.2 + 0.3 * min(1.0, overhang / 60)
    crossed = set()
    for kind, thing, segment in grid.near(guard):
        if kind == "box" and isinstance(thing, Rect) and guard.overlaps(thing):
            cost += 10.0
        elif kind == "label" and isinstance(thing, Rect) and guard.overlaps(thing):
            cost += 5.0
        elif kind == "line" and segment is not None and id(thing) not in crossed and place.crosses(*segment):
            crossed.add(id(thing))
            cost += 3.0 if thing is own else 1.0
    return cost


def _length(edge: Edge) -> float:
    return sum(((bu - au) ** 2 + (bv - av) ** 2) ** 0.5 for (au, av), (bu, bv) in edge.segments)


def layout(nodes: list[str], capabilities: list[tuple[str, str, str, bool]], across: bool) -> Layout:  # noqa: C901, PLR0915
    """The picture's geometry. `capabilities` are (source, destination,
    executor, usable) with both ends among `nodes`."""
    style = NARROW if across else WIDE
    # Sizes along the layers (u) and across them (v).
    box_u, box_v = (style.box_h, style.box_w) if across else (style.box_w, style.box_h)
    edges = [Edge(s, d, x, u) for s, d, x, u in capabilities]
    pairs = {(e.source, e.destination) for e in edges if e.source != e.destination}
    back = _back_edges(nodes, pairs)
    for edge in edges:
        edge.reversed = (edge.source, edge.destination) in back
    ends = {id(e): (e.destination, e.source) if e.reversed else (e.source, e.destination) for e in edges}
    layer = _layers(nodes, {ends[id(e)] for e in edges if e.source != e.destination})

    # Layers of slots: boxes, and a passage in each layer an edge skips.
    rows: list[list[_Item]] = [[] for _ in range(max(layer.values()) + 1)]
    for name in nodes:
        rows[layer[name]].append(_Item(name, box_v))
    chains: dict[int, list[_Key]] = {}
    links: list[tuple[_Key, _Key]] = []
    for n, edge in enumerate(edges):
        first, last = ends[id(edge)]
        if first == last:
            continue
        keys: list[_Key] = [first]
        for i in range(layer[first] + 1, layer[last]):
            rows[i].append(_Item((n, i), PASSAGE))
            keys.append((n, i))
        keys.append(last)
        chains[id(edge)] = keys
        links.extend(pairwise(keys))
    _order(rows, links)
    slot_layer = {item.key: i for i, row in enumerate(rows) for item in row}
    for row in rows:
        v = 0.0
        for i, item in enumerate(row):
            if i:
                both_boxes = isinstance(item.key, str) and isinstance(row[i - 1].key, str)
                v += style.row_gap if both_boxes else style.row_gap / 2
            item.v = v
            v += item.size
    widest = max(row[-1].v + row[-1].size for row in rows if row)
    for row in rows:  # centre each layer on the widest
        shift = (widest - (row[-1].v + row[-1].size)) / 2 if row else 0
        for item in row:
            item.v += shift

    low, high = style.layer_gap
    if across:  # labels sit beside the (upright) edges: more edges between two layers need more height
        crowd = max((sum(1 for a, _b in links if slot_layer[a] == i) for i in range(len(rows))), default=0)
        gap = min(high, low + 18 * max(0, crowd - 2))
    else:  # room for the longest label between two columns
        gap = min(high, max([low, *(label_width(e.label) + 2 * (LABEL_GAP + CLEARANCE) + 8 for e in edges)]))
    u_of = [i * (box_u + gap) for i in range(len(rows))]
    slot = {item.key: (u_of[i], item) for i, row in enumerate(rows) for item in row}
    boxes_uv = {name: Rect(slot[name][0], slot[name][1].v, box_u, box_v) for name in nodes}

    # Ports: where edges leave (far side) and enter (near side) each box, spread out.
    sides: dict[tuple[str, str], list[tuple[float, Edge, str]]] = defaultdict(list)
    for edge in edges:
        chain = chains.get(id(edge))
        if chain is None:
            continue
        source, destination = ends[id(edge)]  # the chain's first and last keys
        sides[(source, "far")].append((slot[chain[1]][1].middle, edge, "out"))
        sides[(destination, "near")].append((slot[chain[-2]][1].middle, edge, "in"))
    port: dict[tuple[int, str], float] = {}
    for (name, _side), members in sides.items():
        port.update(_ports(members, boxes_uv[name].h))

    loops: dict[str, int] = defaultdict(int)
    for edge in edges:
        chain = chains.get(id(edge))
        if chain is None:  # onto itself: a small loop on the box's outer side (below, or right)
            box = boxes_uv[edge.source]
            k = loops[edge.source]
            loops[edge.source] += 1
            mu, out, half, deep = box.x + box.w / 2, box.bottom, 10 + 6 * k, 28 + 12 * k
            a, b = (mu + half, out), (mu - half, out)
            edge.route([(a, (a[0] + 14, out + deep), (b[0] - 14, out + deep), b)])
            continue
        source, destination = ends[id(edge)]
        first_box, last_box = boxes_uv[source], boxes_uv[destination]
        points = [(first_box.right, first_box.y + first_box.h / 2 + port[(id(edge), "out")])]
        for key in chain[1:-1]:
            u, item = slot[key]
            points.extend([(u, item.middle), (u + box_u, item.middle)])
        points.append((last_box.x, last_box.y + last_box.h / 2 + port[(id(edge), "in")]))
        curves = []
        for i in range(len(points) - 1):
            a, b = points[i], points[i + 1]
            curves.append(_straight(a, b) if i % 2 else _s_curve(a, b))
        edge.route(curves)

    # Labels, short edges first (they have the least room).
    grid = _Grid()
    for box in boxes_uv.values():
        grid.add_rect("box", box)
    for edge in edges:
        for a, b in edge.segments:
            grid.add_segment(edge, a, b)
    top = min(box.y for box in boxes_uv.values())
    hull = Rect(0, top, 0, max(box.bottom for box in boxes_uv.values()) - top)
    for edge in sorted(edges, key=_length):
        # Labels read left to right: along the layers when they are columns, across when rows.
        room_u, room_v = (LABEL_H, label_width(edge.label)) if across else (label_width(edge.label), LABEL_H)
        best: tuple[Rect, int] | None = None
        best_cost = float("inf")
        for place, side, extra in _label_places(edge, room_u, room_v):
            cost = _cost(place, grid, hull, edge) + extra
            if cost < best_cost:
                best, best_cost = (place, side), cost
                if cost == 0:
                    break
        assert best is not None
        edge.label_box = best[0]
        edge.label_anchor = ("end" if best[1] < 0 else "start") if across else "middle"
        grid.add_rect("label", best[0])

    # From (u, v) to (x, y).
    if across:
        for edge in edges:
            edge.route([_swapped(curve) for curve in edge.curves])
            edge.label_box = edge.label_box.swapped() if edge.label_box else None
        boxes_xy = {name: box.swapped() for name, box in boxes_uv.items()}
    else:
        boxes_xy = boxes_uv
    return Layout(across=across, boxes=boxes_xy, edges=edges)
