"""What a template may not contain, checked when it is uploaded or edited.

Templates are shared, so they carry no connection settings (the keys only data nodes set), no
secrets (``ENC(...)`` values, wrapped keys, secret-named keys in clear) and no class outside the
allowed packages (docs/security.md). The compiler checks the resolved properties again.
"""

from __future__ import annotations

from pyhocon import ConfigTree

from portal.keys.client import looks_encrypted
from portal.pipeline.schema import user_property_problems
from portal.templatepacks import hocon

WRAPPED_KEY = "encrypt.wrapped.key"


def tree_problems(tree: ConfigTree) -> list[str]:
    """One message per refused key of one template's own (unresolved) tree."""
    leaves = hocon.plain_leaves(tree)
    problems = user_property_problems(leaves, looks_encrypted, where="a template")
    for key, value in sorted(leaves.items()):
        if key == WRAPPED_KEY or key.endswith("." + WRAPPED_KEY):
            problems.append(f"{key!r} is a wrapped key; templates cannot carry keys")
        elif looks_encrypted(value):
            problems.append(f"{key!r} is an ENC(...) value; templates cannot carry secrets")
    return problems
