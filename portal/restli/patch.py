"""Rest.li patch documents (`{"$set": {…}, "$delete": […], "field": {…}}`),
applied to a record as Rest.li's PatchApplier does."""

from __future__ import annotations

import copy
from typing import Any


def apply_patch(record: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A patched copy of `record`. ValueError says what in the patch is wrong."""
    result = copy.deepcopy(record)
    _apply(result, patch, "")
    return result


def _apply(target: dict[str, Any], patch: Any, path: str) -> None:  # noqa: C901
    if not isinstance(patch, dict):
        raise ValueError(f"the patch at {path or '/'} must be an object")
    for name, operation in patch.items():
        if name == "$set":
            if not isinstance(operation, dict):
                raise ValueError(f"$set at {path or '/'} must be an object")
            target.update(copy.deepcopy(operation))
        elif name == "$delete":
            if not isinstance(operation, list) or not all(isinstance(f, str) for f in operation):
                raise ValueError(f"$delete at {path or '/'} must be a list of field names")
            for field in operation:
                target.pop(field, None)
        elif name.startswith("$"):
            raise ValueError(f"unknown patch operation {name!r} at {path or '/'}")
        else:
            child = target.get(name)
            if child is None:
                child = target[name] = {}
            if not isinstance(child, dict):
                raise ValueError(f"{path}/{name} is not a record or map, it cannot be patched field by field")
            _apply(child, operation, f"{path}/{name}")
