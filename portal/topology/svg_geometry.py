"""The shapes of the topology picture: boxes, edges made of cubic curves,
and the sizes every part of the drawing agrees on (`svg_layout` places
them, `svg` draws them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

MARGIN = 12
LABEL_FONT = 11  # px
LABEL_H = 16  # the room a label takes across: one line of LABEL_FONT and its halo
LABEL_CHAR_W = 6.0  # a generous average advance of LABEL_FONT sans-serif characters (DejaVu Sans: 5.6)
LABEL_PAD = 4  # room for the halo at both ends of the text
LABEL_GAP = 3  # between a label's room and its edge
CLEARANCE = 3  # a label keeps this far from boxes and other labels
SAMPLES = 24  # points per curve segment, for the collision checks
PASSAGE = 14  # the room an edge skipping a layer takes in it
PORT_STEP = 12  # between edges leaving or entering one side of a box
ALONG = (0.5, *(x for i in range(1, 9) for x in (0.5 - i * 0.05, 0.5 + i * 0.05)))  # label places, best first

Point = tuple[float, float]
Cubic = tuple[Point, Point, Point, Point]


@dataclass(frozen=True)
class Style:
    box_w: float  # a box's width and height, as drawn
    box_h: float
    layer_gap: tuple[float, float]  # (least, most) room between layers; labels widen it up to most
    row_gap: float  # between boxes of one layer


WIDE = Style(box_w=150, box_h=40, layer_gap=(110, 240), row_gap=34)  # layers as columns
NARROW = Style(box_w=136, box_h=40, layer_gap=(64, 160), row_gap=24)  # layers as rows


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h

    def grown(self, by: float) -> Rect:
        return Rect(self.x - by, self.y - by, self.w + 2 * by, self.h + 2 * by)

    def swapped(self) -> Rect:
        return Rect(self.y, self.x, self.h, self.w)

    def overlaps(self, other: Rect) -> bool:
        return (
            self.x < other.right and other.x < self.right and self.y < other.bottom and other.y < self.bottom
        )

    def crosses(self, a: Point, b: Point) -> bool:
        """Does the segment a-b pass through this rectangle? (Liang-Barsky clipping.)"""
        (x0, y0), (x1, y1) = a, b
        dx, dy = x1 - x0, y1 - y0
        low, high = 0.0, 1.0
        for p, q in ((-dx, x0 - self.x), (dx, self.right - x0), (-dy, y0 - self.y), (dy, self.bottom - y0)):
            if p == 0:
                if q < 0:
                    return False
                continue
            t = q / p
            if p < 0:
                low = max(low, t)
            else:
                high = min(high, t)
            if low > high:
                return False
        return True


def _cubic_points(curve: Cubic) -> list[Point]:
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = curve
    if y0 == y1 == y2 == y3 or x0 == x1 == x2 == x3:  # a straight stretch: its two ends will do
        return [(x0, y0), (x3, y3)]
    points = []
    for i in range(SAMPLES + 1):
        t = i / SAMPLES
        u = 1 - t
        a, b, c, d = u**3, 3 * u * u * t, 3 * u * t * t, t**3
        points.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return points


@dataclass
class Edge:
    source: str
    destination: str
    executor: str
    usable: bool
    reversed: bool = False  # drawn from destination to source (against the layers): arrowhead at the start
    label_box: Rect | None = None
    label_anchor: str = "middle"  # the text's end nearest its edge: "start" (after the edge), "end", "middle"
    curves: list[Cubic] = field(default_factory=list, init=False)
    points: list[Point] = field(default_factory=list, init=False)  # sampled, for the collision checks

    def route(self, curves: list[Cubic]) -> None:
        self.curves = curves
        self.points = []
        for curve in curves:
            self.points.extend(_cubic_points(curve)[1 if self.points else 0 :])

    @property
    def label(self) -> str:
        return self.executor + ("" if self.usable else " (off)")

    @property
    def segments(self) -> list[tuple[Point, Point]]:
        return list(pairwise(self.points))

    def at(self, t: float) -> Point:
        """The point at fraction t of the way along the edge."""
        steps = [((bx - ax) ** 2 + (by - ay) ** 2) ** 0.5 for (ax, ay), (bx, by) in self.segments]
        left = t * sum(steps)
        for ((ax, ay), (bx, by)), step in zip(self.segments, steps, strict=True):
            if left <= step and step:
                f = left / step
                return (ax + (bx - ax) * f, ay + (by - ay) * f)
            left -= step
        return self.points[-1]

    @property
    def path(self) -> str:
        def pt(p: Point) -> str:
            return f"{round(p[0], 1):g},{round(p[1], 1):g}"

        return f"M{pt(self.curves[0][0])} " + " ".join(
            f"C{pt(a)} {pt(b)} {pt(c)}" for _s, a, b, c in self.curves
        )


@dataclass
class Layout:
    """Where everything goes in one orientation: `across` False for layers
    as columns (left to right), True for layers as rows (top down)."""

    across: bool
    boxes: dict[str, Rect] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    @property
    def bounds(self) -> Rect:
        rects = [*self.boxes.values(), *(e.label_box for e in self.edges if e.label_box)]
        points = [p for e in self.edges for p in e.points]
        left = min([r.x for r in rects] + [x for x, _y in points]) - MARGIN
        top = min([r.y for r in rects] + [y for _x, y in points]) - MARGIN
        right = max([r.right for r in rects] + [x for x, _y in points]) + MARGIN
        bottom = max([r.bottom for r in rects] + [y for _x, y in points]) + MARGIN
        return Rect(left, top, right - left, bottom - top)


def label_width(text: str) -> float:
    return len(text) * LABEL_CHAR_W + 2 * LABEL_PAD
