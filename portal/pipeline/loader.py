"""Load pluggable classes (sources, converters, policies, fork operators, writers) by dotted path.

Users name classes in properties; a typo must fail the task with the key that held it, not with a
bare ImportError deep in a stack trace.
"""

from __future__ import annotations

import importlib
from typing import Any

from portal.pipeline.errors import ClassLoadError


def load_class(path: str, key: str, base: type | None = None) -> type[Any]:
    """Import ``package.module.ClassName``; ``key`` is the property named in the error message."""
    module_name, _, class_name = path.strip().rpartition(".")
    if not module_name or not class_name:
        raise ClassLoadError(f"{key}: '{path}' is not a dotted class path (package.module.ClassName)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ClassLoadError(
            f"{key}: cannot import module '{module_name}' for class '{path}' ({exc})"
        ) from exc
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ClassLoadError(f"{key}: module '{module_name}' has no class '{class_name}'")
    if base is not None and not issubclass(cls, base):
        raise ClassLoadError(f"{key}: '{path}' is not a {base.__name__}")
    return cls
