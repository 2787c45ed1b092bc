"""Property lookup with the uniform fork-branch key rule.

Job properties are a flat ``dict[str, str]`` of Gobblin-style keys. Components never read the dict
directly: they get a :class:`Properties` view bound to a *scope* — the pre-fork stream or one fork
branch — so the rule for ``.N`` suffixed keys lives in exactly one place:

* Keys of the branch-scoped families (``converter.``, ``qualitychecker.``, ``writer.``,
  ``data.publisher.``) read by a branch ``N`` of a job with more than one branch are read as
  ``key.N`` only.  With a single branch, branch 0 reads ``key.0`` and falls back to the bare key.
* The class lists (``converter.classes``, ``qualitychecker.row.policies`` / ``.policy.types``,
  ``qualitychecker.task.policies`` / ``.policy.types``) are the exception to the fallback: the bare
  list always belongs to the pre-fork stream, so a single-branch job never runs it twice.
* The pre-fork stream (and job-level code) reads bare keys only.  Keys outside the families
  (``source.*``, ``extract.*``, ``job.*``, ``fork.*``) are never suffixed.

With more than one branch a bare ``writer.*`` / ``data.publisher.*`` key has no meaning (the pre-fork
stream has no writer), so :func:`check_branch_keys` rejects it instead of silently ignoring it, as it
rejects a suffix naming a branch that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from portal.pipeline.errors import ConfigError, MissingPropertyError
from portal.pipeline.propertyrules import (
    BOOL,
    BRANCH_SCOPED_PREFIXES,
    CHOICE,
    INT,
    MAPPING,
    NUMBER,
    PropertySpec,
    missing_message,
    parse_value,
    spec_for,
)

WRITER_ONLY_PREFIXES = ("writer.", "data.publisher.")
CLASS_LIST_KEYS = frozenset(
    {
        "converter.classes",
        "qualitychecker.row.policies",
        "qualitychecker.row.policy.types",
        "qualitychecker.task.policies",
        "qualitychecker.task.policy.types",
    }
)
_SUFFIX = re.compile(r"^(?P<base>.+)\.(?P<index>\d+)$")


def is_branch_scoped(key: str) -> bool:
    """True when ``key`` belongs to a family that takes a ``.N`` branch suffix."""
    return key.startswith(BRANCH_SCOPED_PREFIXES)


class Properties(Mapping[str, str]):
    """A read-only view of the job properties, bound to the pre-fork stream or to one branch.

    ``branch`` is ``None`` for the pre-fork stream / job level.  Lookups go through
    :meth:`candidates`, which implements the rule documented in the module docstring.
    """

    def __init__(
        self,
        values: Mapping[str, str],
        branch: int | None = None,
        num_branches: int = 1,
        branch_name: str | None = None,
    ) -> None:
        self._values = {str(k): "" if v is None else str(v) for k, v in values.items()}
        self.branch = branch
        self.num_branches = num_branches
        self.branch_name = branch_name

    # Mapping protocol: the raw, unscoped values (for code that must see everything, e.g. redaction).
    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def raw(self) -> dict[str, str]:
        """A copy of all properties, unscoped."""
        return dict(self._values)

    def for_branch(self, index: int, num_branches: int, name: str) -> Properties:
        """The view a component of branch ``index`` reads through."""
        return Properties(self._values, index, num_branches, name)

    def pre_fork(self) -> Properties:
        """The view of the pre-fork stream (bare keys only)."""
        return Properties(self._values, None, self.num_branches, None)

    def candidates(self, key: str) -> list[str]:
        """The actual key names read for ``key`` in this scope, in priority order."""
        if self.branch is None or not is_branch_scoped(key):
            return [key]
        suffixed = f"{key}.{self.branch}"
        if self.num_branches > 1 or key in CLASS_LIST_KEYS:
            return [suffixed]
        return [suffixed, key]

    def describe(self, key: str) -> str:
        """How a key is named in error messages: the key(s) read plus the branch."""
        names = " or ".join(f"'{k}'" for k in self.candidates(key))
        if self.branch is None or not is_branch_scoped(key):
            return names
        return f"{names} for branch {self.branch} ({self.branch_name or f'fork_{self.branch}'})"

    # Mapping.get's default may be of any type; a property's default is text.
    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]  # see above
        for name in self.candidates(key):
            value = self._values.get(name)
            if value is not None and value.strip() != "":
                return value.strip()
        return default

    def require(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            spec = spec_for(key) or PropertySpec(key, "string", "")
            raise MissingPropertyError(missing_message(self.describe(key), spec))
        return value

    def typed(self, key: str, kind: str) -> object:
        """The value parsed as the property schema declares ``key`` (``kind`` for a key the schema
        reads otherwise); ConfigError with the schema's message, the one the save gives too."""
        value = self.get(key)
        if value is None:
            return None
        spec = spec_for(key)
        if spec is None or spec.type != kind:
            spec = PropertySpec(key, kind, "")
        try:
            return parse_value(spec, value, self.describe(key))
        except ValueError as error:
            raise ConfigError(str(error)) from None

    def get_int(self, key: str, default: int | None = None) -> int | None:
        value = self.typed(key, INT)
        return default if value is None else int(value)  # type: ignore[call-overload]  # typed() gives an int

    def get_float(self, key: str, default: float | None = None) -> float | None:
        value = self.typed(key, NUMBER)
        return default if value is None else float(value)  # type: ignore[arg-type]  # typed() gives a number

    def get_bool(self, key: str, default: bool = False) -> bool:
        value = self.typed(key, BOOL)
        return default if value is None else bool(value)

    def get_choice(self, key: str) -> str | None:
        """One of the key's declared values (as declared), else its declared default."""
        value = self.typed(key, CHOICE)
        if value is None:
            spec = spec_for(key)
            return spec.default if spec else None
        return str(value)

    def get_list(self, key: str, sep: str = ",") -> list[str]:
        value = self.get(key)
        if value is None:
            return []
        return [item.strip() for item in value.split(sep) if item.strip()]

    def get_mapping(self, key: str) -> dict[str, str]:
        """Parse ``a:b,c:d`` into ``{"a": "b", "c": "d"}`` (used by rename/cast converters)."""
        value = self.typed(key, MAPPING)
        return dict(value) if value else {}  # type: ignore[call-overload]  # typed() gives a dict


def check_branch_keys(values: Mapping[str, str], num_branches: int) -> None:
    """Reject keys the uniform rule would silently ignore.

    With more than one branch a bare ``writer.*``/``data.publisher.*`` key is ambiguous; a suffix
    ``.N`` with ``N >= num_branches`` names a branch that does not exist.
    """
    problems: list[str] = []
    for key in sorted(values):
        if not is_branch_scoped(key):
            continue
        match = _SUFFIX.match(key)
        if match:
            index = int(match.group("index"))
            if index >= num_branches:
                problems.append(
                    f"'{key}' is for branch {index} but there are {num_branches} branch(es) "
                    f"(indices 0..{num_branches - 1})"
                )
        elif num_branches > 1 and key.startswith(WRITER_ONLY_PREFIXES):
            problems.append(
                f"'{key}' has no branch suffix but fork.branches={num_branches}; "
                f"set '{key}.0' .. '{key}.{num_branches - 1}' instead"
            )
    if problems:
        raise ConfigError("; ".join(problems))


def branch_names(props: Properties, num_branches: int) -> list[str]:
    """``fork.branch.name.N`` or the default ``fork_N``."""
    return [props.get(f"fork.branch.name.{i}") or f"fork_{i}" for i in range(num_branches)]
