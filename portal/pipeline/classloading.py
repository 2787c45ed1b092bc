"""Load pluggable classes (sources, converters, policies, fork operators, writers) by dotted path.

Users name classes in properties, so a class path is untrusted input: it may resolve only inside
``portal.pipeline`` and the packages an operator lists in ``FLOWPORT_PIPELINE_PACKAGES`` (comma
separated), and that is checked *before* anything is imported (importing runs a module's top-level
code). Tests are never importable unless the test environment lists them. A typo must fail the task
with the key that held it, not with a bare ImportError deep in a stack trace.
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any

from portal.pipeline.errors import ClassLoadError

__all__ = ["PACKAGES_ENV", "ClassLoadError", "allowed_packages", "check_class_path", "load_class"]

BUILT_IN_PACKAGE = "portal.pipeline"
PACKAGES_ENV = "FLOWPORT_PIPELINE_PACKAGES"
# Identifiers only, at least package.Class; no segment may start with '_' (no __main__, no dunders).
_DOTTED = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z][A-Za-z0-9_]*)+\Z")


def allowed_packages() -> tuple[str, ...]:
    """``portal.pipeline`` plus the operator's ``FLOWPORT_PIPELINE_PACKAGES`` (read on each call)."""
    extra = [p.strip() for p in os.environ.get(PACKAGES_ENV, "").split(",") if p.strip()]
    return (BUILT_IN_PACKAGE, *extra)


def check_class_path(path: str, key: str) -> tuple[str, str]:
    """(module, class name) of an allowed dotted class path, else ClassLoadError naming ``key``."""
    path = path.strip()
    if not _DOTTED.match(path):
        raise ClassLoadError(f"{key}: '{path[:200]}' is not a dotted class path (package.module.ClassName)")
    module_name, _, class_name = path.rpartition(".")
    allowed = allowed_packages()
    if not any(module_name == p or module_name.startswith(p + ".") for p in allowed):
        raise ClassLoadError(
            f"{key}: '{path}' is outside the packages classes may come from ({', '.join(allowed)}; "
            f"an operator adds packages with {PACKAGES_ENV})"
        )
    return module_name, class_name


def load_class(path: str, key: str, base: type | None = None) -> type[Any]:
    """Import ``package.module.ClassName``; ``key`` is the property named in the error message."""
    module_name, class_name = check_class_path(path, key)
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
