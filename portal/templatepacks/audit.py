"""Writing the append-only audit trail of template packs, with diffs."""

from __future__ import annotations

import difflib

from portal.accounts.proxy import actor_and_subject
from portal.templatepacks.models import PackAuditEvent

MAX_DIFF_CHARS = 200_000


def templates_diff(before: dict[str, str], after: dict[str, str]) -> str:
    """A unified diff over all templates of two versions (added, removed, changed)."""
    chunks: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        chunks.extend(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                (new or "").splitlines(keepends=True),
                fromfile=f"a/{path}" if old is not None else "/dev/null",
                tofile=f"b/{path}" if new is not None else "/dev/null",
            )
        )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in chunks)
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + "\n… (diff truncated)\n"
    return text


def acl_diff(before: list[str], after: list[str]) -> str:
    return "".join(
        difflib.unified_diff([f"{e}\n" for e in before], [f"{e}\n" for e in after], "a/acl", "b/acl")
    )


def record(
    *, pack_name: str, action: str, user, request=None, summary: str, diff: str = "", version_number=None
) -> PackAuditEvent:
    """One audit row. `user` is the effective user; when the request was
    proxied, the real actor is recorded and `user` goes to on_behalf_of."""
    actor, on_behalf_of = actor_and_subject(request, user)
    return PackAuditEvent.objects.create(
        pack_name=pack_name,
        action=action,
        actor=actor,
        on_behalf_of=on_behalf_of,
        summary=summary[:1000],
        diff=diff,
        version_number=version_number,
    )
