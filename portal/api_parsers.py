"""The API's JSON parser, with a nesting limit.

Python's json module recurses once per nesting level, so a 1 MiB body of ``[[[[…`` raises
RecursionError (a 500) in DRF's JSONParser. No request body of the API needs more than a few
levels, so anything deeper than ``MAX_JSON_DEPTH`` is a 400 naming the limit, checked by a linear
scan before the body is decoded (DRF has no depth option; hence this subclass).
"""

from __future__ import annotations

import io
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_JSON_DEPTH = 32


def json_depth(text: str) -> int:
    """The deepest nesting of objects/arrays in a JSON text (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        raw = stream.read() if stream is not None else b""
        encoding = (parser_context or {}).get("encoding") or "utf-8"
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            raise ParseError("JSON parse error - the body is not valid UTF-8.") from None
        if json_depth(text) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels (the limit).")
        return super().parse(io.BytesIO(raw), media_type, parser_context)
