"""Reading a page's tables the way the phone layout shows them: on narrow
screens rows stack into cards and each cell shows its column's name from its
`data-label` (flowport.css), so every cell must carry its column's header."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Table:
    headers: list[str] = field(
        default_factory=list
    )  # visible header text per column ("" when visually hidden)
    cells: list[tuple[int, str | None, str]] = field(default_factory=list)  # (column, data-label, text)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Table] = []
        self._table: Table | None = None
        self._th: list[str] | None = None
        self._hidden = 0
        self._column = 0
        self._td: tuple[int, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "table" and "table" in classes:
            self._table = Table()
            self.tables.append(self._table)
        if self._table is None:
            return
        if tag == "tr":
            self._column = 0
        elif tag == "th":
            self._th = []
        elif tag == "td":
            if a.get("colspan"):  # a whole-row message ("No executions match."): no column
                self._td = (-1, a.get("data-label"))
            else:
                self._td = (self._column, a.get("data-label"))
            self._text = []
            self._column += 1
        elif "visually-hidden" in classes and self._th is not None:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if self._table is None:
            return
        if tag == "table":
            self._table = None
        elif tag == "th" and self._th is not None:
            self._table.headers.append(" ".join("".join(self._th).split()))
            self._th = None
        elif tag == "span" and self._hidden:
            self._hidden -= 1
        elif tag == "td" and self._td is not None:
            self._table.cells.append((*self._td, " ".join("".join(self._text).split())))
            self._td = None

    def handle_data(self, data: str) -> None:
        if self._th is not None and not self._hidden:
            self._th.append(data)
        if self._td is not None:
            self._text.append(data)


def read_tables(html: str | bytes) -> list[Table]:
    reader = _Reader()
    reader.feed(html.decode() if isinstance(html, bytes) else html)
    return reader.tables


def cells_by_label(html: str | bytes) -> dict[str, list[str]]:
    """Every labelled cell's text, by its label, over all the page's tables."""
    found: dict[str, list[str]] = {}
    for table in read_tables(html):
        for _column, label, text in table.cells:
            if label:
                found.setdefault(label, []).append(text)
    return found


def assert_cells_name_their_columns(html: str | bytes) -> None:
    """Each cell's data-label is its column's header. Only a column whose
    header is visually hidden (buttons that say what they do) goes unlabelled."""
    tables = read_tables(html)
    assert tables, "no table on the page"
    for table in tables:
        for column, label, text in table.cells:
            if column < 0:
                continue
            header = table.headers[column]
            if header:
                assert label == header, f"cell {text!r} is labelled {label!r}, its column is {header!r}"
            else:
                assert label is None, f"cell {text!r} is labelled {label!r} under a hidden header"
