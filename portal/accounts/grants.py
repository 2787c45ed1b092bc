"""Reading an access list as users send it — `[{"role": …, "user"|"group": name}]`
— into unsaved rows of a PrincipalGrant model: one parser for a template
pack's ACL and a data node's grants, so both refuse the same mistakes with
the same words; and how a change of one is written in an audit trail."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError

from portal.accounts.models import PrincipalGrant

Grant = TypeVar("Grant", bound=PrincipalGrant)


class EntryProblem:
    """Makes the errors of one entry: "entry <index>: <problem>", both kept as params."""

    CODE = "acl_entry"

    def __init__(self, index: int) -> None:
        self.index = index

    def __call__(self, problem: str) -> ValidationError:
        return ValidationError(
            "entry %(index)s: %(problem)s", code=self.CODE, params={"index": self.index, "problem": problem}
        )


def parse_principal_grants(  # noqa: C901
    entries: Any, model: type[Grant], *, roles: Iterable[str], field: str
) -> list[Grant]:
    """Validated, unsaved rows (a repeated entry once); ValidationError({field: [...]})
    naming each bad entry by its position ("entry 3: …"). Each problem carries its entry's
    position (params ``index``) and the words without it (``problem``), so a form that
    wrote the entries from its own inputs can show each problem at the input it came from."""
    if not isinstance(entries, list):
        raise ValidationError({field: ["Send a list of {role, user|group} entries."]})
    roles = sorted(roles)
    rows: list[Grant] = []
    problems: list[ValidationError] = []
    seen: set[tuple[Any, ...]] = set()
    users = get_user_model().objects
    for index, entry in enumerate(entries, start=1):
        where = EntryProblem(index)
        if not isinstance(entry, dict):
            problems.append(where("must be an object with 'role' and 'user' or 'group'."))
            continue
        role, user_name, group_name = entry.get("role"), entry.get("user"), entry.get("group")
        if role not in roles:
            problems.append(where(f"role must be one of {', '.join(roles)}, not {role!r}."))
            continue
        if bool(user_name) == bool(group_name) or not isinstance(user_name or group_name, str):
            problems.append(where("give exactly one of 'user' or 'group' (a name)."))
            continue
        key = (role, "user" if user_name else "group", user_name or group_name)
        if key in seen:
            continue
        seen.add(key)
        if user_name:
            user = users.filter(username=user_name).first()
            if user is None:
                problems.append(where(f"no user named {user_name!r}."))
            else:
                rows.append(model(role=role, user=user))
            continue
        group = Group.objects.filter(name=group_name).first()
        if group is None:
            problems.append(
                where(f"no group named {group_name!r} (directory groups appear after a member logs in).")
            )
        else:
            rows.append(model(role=role, group=group))
    if problems:
        raise ValidationError({field: problems})
    return rows


def describe_grants(entries: Iterable[dict[str, str]]) -> list[str]:
    """One line per entry, as an audit diff shows it: `read group:sales`."""
    return [
        f"{e['role']} {'user' if 'user' in e else 'group'}:{e.get('user') or e.get('group')}" for e in entries
    ]


def grants_diff(before: list[str], after: list[str], name: str = "acl") -> str:
    """A unified diff of two access lists described by `describe_grants`."""
    return "".join(
        difflib.unified_diff([f"{e}\n" for e in before], [f"{e}\n" for e in after], f"a/{name}", f"b/{name}")
    )
