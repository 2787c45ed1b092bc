"""What a template may not contain, checked when it is uploaded or edited.

Templates are shared, so they carry no connection settings (the keys only data nodes set), no
secrets (``ENC(...)`` values, wrapped keys, secret-named keys in clear) and no class outside the
allowed packages (docs/security.md). Nor may one grow past the expansion limits when it resolves
(`hocon.ExpansionLimit`). The compiler checks the resolved properties again.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyhocon import ConfigTree

from portal.crypto.client import looks_encrypted
from portal.pipeline.propertyrules import user_property_problems
from portal.templatepacks import hocon

WRAPPED_KEY = "encrypt.wrapped.key"


def tree_problems(tree: ConfigTree, parents: Sequence[ConfigTree] = ()) -> list[str]:
    """One message per refused key of one template's own (unresolved) tree; `parents`, its
    ancestors nearest first, count for how far it expands."""
    leaves = hocon.plain_leaves(tree)
    problems = user_property_problems(leaves, looks_encrypted, where="a template")
    for key, value in sorted(leaves.items()):
        if key == WRAPPED_KEY or key.endswith("." + WRAPPED_KEY):
            problems.append(f"{key!r} is a wrapped key; templates cannot carry keys")
        elif looks_encrypted(value):
            problems.append(f"{key!r} is an ENC(...) value; templates cannot carry secrets")
    return problems + expansion_problems([*reversed(parents), tree])


def expansion_problems(layers: Sequence[ConfigTree]) -> list[str]:
    """The expansion limit templates (lowest precedence first) pass when they resolve as a flow
    that gives no values would resolve them (its attributes empty). The resolution stops at the
    limit, before anything large is built. Templates that resolve only with a flow's values are
    judged when that flow is saved or compiled, where the same limits hold."""
    try:
        hocon.resolve_layers(list(layers))
    except hocon.ExpansionLimit as error:
        return [str(error)]
    except hocon.HoconError:
        return []
    return []
