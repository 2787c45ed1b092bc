"""Path confinement: every path a job reads or writes lies inside the root it was granted.

A path is refused when it has a ``..`` segment, when it resolves (symlinks followed, for local
paths) outside its root, or when it is on another file system than its root (a Hadoop URI with
another scheme or authority). No Django here: the worker's guard and the publisher both use it.
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


def contains(root: str, path: str) -> bool:
    """True when ``path`` (e.g. the master key file) would be reachable under ``root``."""
    if not path:
        return False
    return is_inside(path, root)
