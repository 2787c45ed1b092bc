"""Path confinement: every path a job reads or writes lies inside the root it was granted.

A path is refused when it has a ``..`` segment, when it resolves (symlinks followed, for local
paths) outside its root, or when it is on another file system than its root (a Hadoop URI with
another scheme or authority). No Django here: the worker's guard and the commit plan both use it.
"""

from __future__ import annotations

import os
import posixpath
from urllib.parse import urlparse

from portal.pipeline.errors import ConfigError


class ConfinementError(ConfigError):
    """A path lies outside the root it must stay in."""


def _scheme(uri: str) -> str:
    scheme = urlparse(uri).scheme
    return scheme if len(scheme) > 1 else ""


def has_parent_segment(path: str) -> bool:
    return ".." in path.replace("\\", "/").split("/")


def resolve(path: str) -> str:
    """A comparable form: local paths (and ``file://``) made absolute with symlinks followed;
    other URIs ``scheme://authority`` + the normalised path."""
    scheme = _scheme(path)
    if scheme in ("", "file"):
        local = urlparse(path).path if scheme == "file" else path
        return os.path.realpath(os.path.abspath(local))
    parsed = urlparse(path)
    return f"{scheme}://{parsed.netloc}{posixpath.normpath(parsed.path or '/')}"


def is_inside(path: str, root: str) -> bool:
    """True when ``path`` (resolved) is ``root`` (resolved) or below it."""
    if has_parent_segment(path):
        return False
    resolved, base = resolve(path), resolve(root)
    if resolved == base:
        return True
    return resolved.startswith(base.rstrip("/") + "/")


def confine(path: str, root: str, what: str) -> str:
    """``path`` when it lies inside ``root``, else ConfinementError naming ``what``."""
    if not path or not is_inside(path, root):
        raise ConfinementError(f"{what}: '{path}' lies outside '{root}' (paths stay inside their data node)")
    return path


def real_inside(path: str, root: str, what: str) -> str:
    """The real path of ``path`` (symlinks followed) when it lies inside the real ``root``.

    This is the decision made where data is touched: whatever spelling reached ``path`` (a glob, a
    symlink, a folder swapped for a link), what counts is the file it opens. The refusal names
    neither the target nor whether it exists, so it answers no question about what lies outside.
    """
    real, base = resolve(path), resolve(root)
    if real != base and not real.startswith(base.rstrip("/") + "/"):
        raise ConfinementError(
            f"{what}: refused, it leads outside its data node (a symbolic link or a path out of it)"
        )
    return real


def relative_name_problem(value: str, *, folders: bool = False) -> str | None:
    """Why ``value`` is not a plain name relative to a data node, or None.

    Refused rather than normalised: ``..``, absolute paths, ``~``, URIs, backslashes and percent
    escapes each have a reader somewhere (Spark, Hadoop, a shell) that gives them a meaning of its
    own. ``folders`` allows ``a/b`` (a path below the node); otherwise one name, no ``/``.
    """
    text = value.strip()
    if not text:
        return "is empty"
    if "\\" in text:
        return "has a backslash"
    if "%" in text:
        return "has a '%' (escapes are not decoded: give the plain name)"
    if text.startswith(("/", "~")) or _scheme(text) or ":/" in text:
        return "is absolute (give a name relative to the data node)"
    segments = text.split("/")
    if ".." in segments or "." in segments or "" in segments:
        return "has a '.', '..' or empty segment"
    if not folders and len(segments) > 1:
        return "has a '/' (one folder directly under the data node)"
    return None


def contains(root: str, path: str) -> bool:
    """True when ``path`` (e.g. the master key file) would be reachable under ``root``."""
    if not path:
        return False
    return is_inside(path, root)
