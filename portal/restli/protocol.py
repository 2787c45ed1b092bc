"""Rest.li 2.0 object notation in URLs and headers, both ways.

Gobblin's clients put complex keys and finder parameters in the URL as
`(flowGroup:g,flowName:n)`, `($params:(),flowGroup:g,flowName:n)` or
`List(a,b)`. The characters `(`, `)`, `,`, `:` and `'` inside a key or value
are percent-encoded, `''` is the empty string, and a whole key may arrive
percent-encoded once more (`%28flowGroup%3Ag…%29`). There is no Python
Rest.li library to lean on, so this small parser is written here; it never
touches Django.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

_STRUCTURE = "(),:"
MAX_DEPTH = 16
MAX_LENGTH = 8192


class RestLiSyntaxError(ValueError):
    """Text that is not Rest.li 2.0 object notation; the message says where."""


def _decode(text: str) -> str:
    return "" if text == "''" else unquote(text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, reason: str) -> RestLiSyntaxError:
        return RestLiSyntaxError(f"{reason} at position {self.pos} of {self.text[:200]!r}")

    def token(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _STRUCTURE:
            self.pos += 1
        return self.text[start : self.pos]

    def expect(self, char: str) -> None:
        if self.pos >= len(self.text) or self.text[self.pos] != char:
            raise self.fail(f"expected {char!r}")
        self.pos += 1

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise self.fail("nested too deeply")
        if self.text.startswith("List(", self.pos):
            self.pos += len("List")
            return self.sequence(depth)
        if self.text.startswith("(", self.pos):
            return self.object(depth)
        return _decode(self.token())

    def sequence(self, depth: int) -> list[Any]:
        self.expect("(")
        items: list[Any] = []
        if self.text.startswith(")", self.pos):
            self.pos += 1
            return items
        while True:
            items.append(self.value(depth + 1))
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            self.expect(")")
            return items

    def object(self, depth: int) -> dict[str, Any]:
        self.expect("(")
        fields: dict[str, Any] = {}
        if self.text.startswith(")", self.pos):
            self.pos += 1
            return fields
        while True:
            name = _decode(self.token())
            if not name:
                raise self.fail("expected a field name")
            self.expect(":")
            if name in fields:
                raise self.fail(f"field {name!r} given twice")
            fields[name] = self.value(depth + 1)
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            self.expect(")")
            return fields


def parse(text: str) -> Any:
    """A Rest.li 2.0 encoded value: a dict for `(…)`, a list for `List(…)`,
    else the decoded string."""
    if len(text) > MAX_LENGTH:
        raise RestLiSyntaxError(f"longer than {MAX_LENGTH} characters")
    if text[:3].upper() == "%28" or text[:7] == "List%28":  # the whole key encoded once more
        text = unquote(text)
    parser = _Parser(text)
    value = parser.value(0)
    if parser.pos != len(text):
        raise parser.fail("unexpected text")
    return value


def _encode_leaf(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return "''" if text == "" else quote(text, safe="-_.~$")


def encode(value: Any) -> str:
    """The Rest.li 2.0 form of a dict, list or scalar; fields sorted by name,
    as Rest.li writes them (so `$params` comes first)."""
    if isinstance(value, dict):
        return "(" + ",".join(f"{_encode_leaf(k)}:{encode(value[k])}" for k in sorted(value)) + ")"
    if isinstance(value, (list, tuple)):
        return "List(" + ",".join(encode(item) for item in value) + ")"
    return _encode_leaf(value)


_HEADER_RESERVED = "%(),:'"


def _header_leaf(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    if text == "":
        return "''"
    return "".join(f"%{ord(char):02X}" if char in _HEADER_RESERVED else char for char in text)


def encode_for_header(value: Any) -> str:
    """A key as Rest.li writes it in `X-RestLi-Id` (URIParamUtils.encodeKeyForHeader):
    the same notation as `encode`, but no URL escaping, only the notation's
    own characters (and `%`) escaped. The caller leaves out a complex key's
    `$params`: the header carries the key alone."""
    if isinstance(value, dict):
        return "(" + ",".join(f"{_header_leaf(k)}:{encode_for_header(value[k])}" for k in sorted(value)) + ")"
    if isinstance(value, (list, tuple)):
        return "List(" + ",".join(encode_for_header(item) for item in value) + ")"
    return _header_leaf(value)


def parse_query(raw_query: str) -> dict[str, Any]:
    """Query parameters of a Rest.li URL, from the raw (undecoded) query
    string, so that escaped structure characters inside values stay data.
    A repeated parameter keeps its last value."""
    params: dict[str, Any] = {}
    for pair in raw_query.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        name = unquote(name.replace("+", " "))
        value = value.replace("+", "%20")
        params[name] = parse(value) if value[:1] == "(" or value[:3] in ("%28", "Lis") else unquote(value)
    return params
