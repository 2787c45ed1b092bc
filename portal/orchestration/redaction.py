"""What a failure message, a log excerpt or a job log shows to someone who is not staff.

A job that fails writes what Python and Spark say: tracebacks whose frames name the server's
files, and exception messages that quote absolute paths (the node roots, the work area, the
portal's own checkout). Every signed-in user may read an execution's messages, so those are
shown without the server's layout: an absolute path under a data node's root or the work area
reads relative to it (``lake:sales/orders/part-0.parquet``, ``work:sales/orders/…``), any
other absolute path as ``…``; a Python traceback keeps only its exception line, and Java stack
frames are dropped. Staff see every text as it was written (the job log keeps everything).

:func:`redact` is the one function; :func:`for_viewer` picks it or nothing by who reads, for
the API serializers, the pages and their template filter alike.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from portal.accounts.access import Principal
from portal.pipeline import nodekinds
from portal.topology.models import DataNode
from portal.topology.reach import node_root

HIDDEN_PATH = "…"
TRACEBACK_HIDDEN = "[traceback hidden]"
FRAMES_HIDDEN = "\t[stack frames hidden]"

# The characters of one path segment as they appear in messages (no spaces, no quotes).
_SEGMENT = r"[\w.@%+~=$-]"
# Where an absolute path may start: not inside a word, a relative path or a URL's host part.
_START = r"(?<![\w.~/$-])"
_FILE_SCHEME = r"(?:file:(?://)?)?"
_ANY_PATH = re.compile(rf"{_START}{_FILE_SCHEME}/(?!/){_SEGMENT}+(?:/{_SEGMENT}*)*")
_TRACEBACK = "Traceback (most recent call last):"
# A Python frame seen without its header (a log tail cut inside a traceback).
_PY_FRAME = re.compile(r'^\s+File "[^"]*", line \d+')
_JAVA_FRAME = re.compile(r"^\s+(?:at \S+\(.*\)|\.\.\. \d+ (?:more|common frames omitted))\s*$")


@dataclass(frozen=True)
class Places:
    """Absolute roots a path may be shown relative to, each with the name it is shown under."""

    roots: tuple[tuple[str, str], ...] = ()
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _labels: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels: dict[str, str] = {}
        for root, label in self.roots:
            for spelling in {
                root.rstrip("/"),
                os.path.realpath(root).rstrip("/") if root.startswith("/") else "",
            }:
                if len(spelling) > 1:
                    labels.setdefault(spelling, label)
        if labels:
            alternation = "|".join(re.escape(root) for root in sorted(labels, key=len, reverse=True))
            pattern = re.compile(
                rf"{_START}{_FILE_SCHEME}(?P<root>{alternation})(?P<rest>(?:/{_SEGMENT}*)*)(?!{_SEGMENT})"
            )
            object.__setattr__(self, "_pattern", pattern)
        object.__setattr__(self, "_labels", labels)

    def relative(self, text: str) -> str:
        """`text` with each path under a root written as ``<label>:<path inside it>``."""
        if self._pattern is None:
            return text

        def shown(match: re.Match[str]) -> str:
            return f"{self._labels[match['root']]}:{match['rest'].strip('/')}"

        return self._pattern.sub(shown, text)


def redact_lines(lines: Iterable[str], places: Places) -> Iterator[str]:
    """The lines (each with its line end, if any) as someone who is not staff may read them."""
    in_traceback = in_frames = False
    for line in lines:
        body = line.rstrip("\r\n")
        end = line[len(body) :]
        if in_traceback:
            if body[:1] in (" ", "\t"):
                continue  # a frame, its source line or its caret line
            in_traceback = False  # the exception line (or what follows a cut traceback)
        at = body.find(_TRACEBACK)
        if at >= 0 or _PY_FRAME.match(body):
            in_traceback = True
            in_frames = False
            yield (body[:at] if at >= 0 else "") + TRACEBACK_HIDDEN + end
            continue
        if _JAVA_FRAME.match(body):
            if not in_frames:
                in_frames = True
                yield FRAMES_HIDDEN + end
            continue
        in_frames = False
        yield _ANY_PATH.sub(HIDDEN_PATH, places.relative(body)) + end


def redact(text: str, places: Places | None = None) -> str:
    """`text` without tracebacks, and with every absolute path relative to its place or hidden."""
    if not text:
        return text
    return "".join(redact_lines(text.splitlines(keepends=True), places or Places()))


def portal_places() -> Places:
    """The data nodes' roots (files roots, Iceberg warehouses), each shown under its node's name,
    and the work area and log folder: what a failure message may quote a path under."""
    roots: list[tuple[str, str]] = []
    rooted = [name for name, kind in nodekinds.KINDS.items() if kind.root_key]
    for name, kind, properties in DataNode.objects.filter(kind__in=rooted).values_list(
        "name", "kind", "properties"
    ):
        key = nodekinds.root_key(kind)
        root = properties.get(key) if isinstance(properties, dict) else None
        if isinstance(root, str) and root:
            roots.append((node_root(root), name))
    roots.append((str(settings.FLOWPORT_WORK_DIR), "work"))
    roots.append((str(settings.FLOWPORT_LOG_DIR), "logs"))
    return Places(tuple(roots))


def sees_everything(user: Principal) -> bool:
    return bool(getattr(user, "is_staff", False))


class Shown:
    """What one reader sees of texts: all of them (staff), or each redacted over the portal's
    places, read from the database once for this reader."""

    def __init__(self, user: Principal) -> None:
        self.everything = sees_everything(user)
        self._places: Places | None = None

    @property
    def places(self) -> Places:
        if self._places is None:
            self._places = portal_places()
        return self._places

    def __call__(self, text: str) -> str:
        if self.everything or not text:
            return text
        return redact(text, self.places)

    def lines(self, lines: Iterable[str]) -> Iterable[str]:
        return lines if self.everything else redact_lines(lines, self.places)

    def file(self, path: Path) -> Iterator[bytes]:
        """A log file as this reader may read it, line by line (a log may be large)."""
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in self.lines(lines):
                yield line.encode()


def for_viewer(user: Principal) -> Shown:
    """The texts as `user` may read them; kept on the user object of the request, so a page
    showing many messages reads the places once."""
    cached = getattr(user, "_flowport_shown", None)
    if isinstance(cached, Shown):
        return cached
    shown = Shown(user)
    with contextlib.suppress(AttributeError):  # an object that takes no attributes: no cache
        user._flowport_shown = shown  # type: ignore[union-attr]  # a cache on this request's user
    return shown
