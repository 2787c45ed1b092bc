"""Saving a flow's data triggers and freshness goal (flows.triggers.models), for the page and the API
alike: one validation, errors per field, nothing half saved.

An upstream dataset is named `<flowGroup>/<flowName>` (any destination dataset of that flow) or
`<flowGroup>/<flowName>/<dataset.urn>` (that one). The flow's owner must be able to read it: the
upstream flow is their own, or they hold a read grant on every data node it publishes into
(topology.grants) — checked on save here and again when the trigger fires
(orchestration.control.triggers), as a grant can be revoked in between.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, time
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from portal.accounts.access import Principal
from portal.flows.models import FlowConfig
from portal.flows.triggers.goals import first_due, next_due, parse_goal
from portal.flows.triggers.models import (
    MAX_DEBOUNCE_SECONDS,
    MAX_UPSTREAMS,
    FlowTrigger,
    FreshnessGoal,
    UpstreamDataset,
)
from portal.topology import grants as node_access
from portal.topology.models import DataNode

MAX_CHAIN = 50  # how far up the cycle check walks


@dataclass
class TriggerSettings:
    upstream: list[str] = field(default_factory=list)
    upstream_mode: str = FlowTrigger.Mode.ANY
    debounce_seconds: int = 0
    skip_empty: bool = False  # an upstream commit of no record does not count
    on_files: bool = False
    freshness: str = ""
    # Goals of single datasets (dataset.urn → goal text), beside `freshness` (the whole flow's).
    dataset_freshness: dict[str, str] = field(default_factory=dict)
    webhook: bool = False  # read-only: a token exists
    webhook_hint: str = ""


def settings_of(flow: FlowConfig) -> TriggerSettings:
    found = TriggerSettings()
    trigger = FlowTrigger.objects.filter(flow=flow).first()
    if trigger is not None:
        found.upstream = [
            u.name for u in UpstreamDataset.objects.filter(trigger=trigger).select_related("upstream")
        ]
        found.upstream_mode = trigger.upstream_mode
        found.debounce_seconds = trigger.debounce_seconds
        found.skip_empty = trigger.skip_empty
        found.on_files = trigger.on_files
        found.webhook = trigger.has_webhook
        found.webhook_hint = trigger.webhook_token_hint
    for goal in FreshnessGoal.objects.filter(flow=flow):
        if goal.dataset:
            found.dataset_freshness[goal.dataset] = goal.text
        else:
            found.freshness = goal.text
    return found


def split_name(name: str) -> tuple[str, str, str]:
    """`group/name[/dataset]` → (group, name, dataset); ValueError when it is not one."""
    parts = (name or "").strip().split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise ValueError(f"{name!r} is not <flowGroup>/<flowName> or <flowGroup>/<flowName>/<dataset>")
    return parts[0], parts[1], parts[2].strip() if len(parts) == 3 else ""


def read_refusal(owner: Principal | None, upstream: FlowConfig) -> str | None:
    """Why `owner` may not read `upstream`'s destination datasets (None: they may)."""
    if owner is None or not owner.is_active:
        return "the flow's owner is not an active user"
    if owner.is_staff or owner.is_superuser or upstream.owner_id == owner.pk:
        return None
    nodes = node_access.NodeAccess(owner)
    for node in upstream.destinations or []:
        if not nodes.may(node, node_access.READ):
            return (
                f"{owner.get_username()!r} may not read {upstream}'s datasets: no read grant on "
                f"data node {node!r} (ask its owners on {node_access.node_page(node)})"
            )
    return None


def _upstream_flows(  # noqa: C901
    flow: FlowConfig, names: list[str], errors: dict[str, list[str]]
) -> list[tuple[FlowConfig, str]]:
    found: list[tuple[FlowConfig, str]] = []
    problems: list[str] = []
    if len(names) > MAX_UPSTREAMS:
        problems.append(f"At most {MAX_UPSTREAMS} upstream datasets.")
        names = []
    for name in names:
        try:
            group, flow_name, dataset = split_name(name)
        except ValueError as exc:
            problems.append(f"{exc}.")
            continue
        upstream = (
            FlowConfig.objects.filter(flow_group=group, flow_name=flow_name).select_related("owner").first()
        )
        if upstream is None:
            problems.append(f"{group}/{flow_name}: no such flow.")
            continue
        if flow.pk and upstream.pk == flow.pk:
            problems.append(f"{name}: a flow cannot wait for its own datasets.")
            continue
        if len(dataset) > 500:
            problems.append(f"{name}: the dataset name is longer than 500 characters.")
            continue
        if refusal := read_refusal(flow.owner, upstream):
            problems.append(f"{name}: {refusal}.")
            continue
        if flow.pk and _feeds_into(flow.pk, upstream.pk):
            problems.append(
                f"{name}: {upstream} already waits (through its upstreams) for this flow: a cycle."
            )
            continue
        if (upstream, dataset) not in found:
            found.append((upstream, dataset))
    if problems:
        errors["upstream"] = problems
    return found


def _feeds_into(flow_id: int, upstream_id: int) -> bool:
    """Does `upstream_id` wait, directly or further up, for `flow_id`? (Index walks, bounded.)"""
    seen, frontier = set(), {upstream_id}
    for _ in range(MAX_CHAIN):
        if flow_id in frontier:
            return True
        seen |= frontier
        frontier = (
            set(
                UpstreamDataset.objects.filter(trigger__flow_id__in=frontier).values_list(
                    "upstream_id", flat=True
                )
            )
            - seen
        )
        if not frontier:
            return False
    return False


def _files_source_refusal(flow: FlowConfig) -> str | None:
    node = DataNode.objects.filter(name=flow.source).first() if flow.source else None
    if node is None:
        return "The flow names no source data node to watch."
    if node.kind != DataNode.Kind.FILES or not (node.properties or {}).get("path"):
        return f"The source {node.name!r} is not a files data node with a path: there is no folder to watch."
    return None


def validate(  # noqa: C901, PLR0915
    flow: FlowConfig, data: dict[str, Any]
) -> tuple[TriggerSettings, list[tuple[FlowConfig, str]], dict[str, tuple[int | None, time | None]]]:
    """The settings as sent (missing keys keep the flow's own), checked; ValidationError names
    each field at fault."""
    current = settings_of(flow) if flow.pk else TriggerSettings()
    errors: dict[str, list[str]] = {}
    upstream = data.get("upstream", current.upstream)
    if isinstance(upstream, str):
        upstream = [line.strip() for line in upstream.replace(",", "\n").splitlines() if line.strip()]
    if not isinstance(upstream, list) or not all(isinstance(u, str) for u in upstream):
        errors["upstream"] = ["A list of dataset names (<flowGroup>/<flowName>[/<dataset>])."]
        upstream = []
    mode = data.get("upstream_mode", current.upstream_mode) or FlowTrigger.Mode.ANY
    if mode not in FlowTrigger.Mode.values:
        errors["upstream_mode"] = [f"{mode!r} is not one of: any, all."]
    debounce = data.get("debounce_seconds", current.debounce_seconds)
    if (
        isinstance(debounce, bool)
        or not isinstance(debounce, int)
        or not 0 <= debounce <= MAX_DEBOUNCE_SECONDS
    ):
        errors["debounce_seconds"] = [f"A whole number of seconds from 0 to {MAX_DEBOUNCE_SECONDS}."]
        debounce = 0
    skip_empty = data.get("skip_empty", current.skip_empty)
    if not isinstance(skip_empty, bool):
        errors["skip_empty"] = ["true or false."]
        skip_empty = False
    on_files = data.get("on_files", current.on_files)
    if not isinstance(on_files, bool):
        errors["on_files"] = ["true or false."]
        on_files = False
    elif on_files and (refusal := _files_source_refusal(flow)):
        errors["on_files"] = [refusal]
    freshness = data.get("freshness", current.freshness) or ""
    goals: dict[str, tuple[int | None, time | None]] = {}
    if not isinstance(freshness, str):
        errors["freshness"] = ['A text such as "within 2h" or "by 06:00".']
    elif freshness.strip():
        try:
            goals[""] = parse_goal(freshness)
        except ValueError as exc:
            errors["freshness"] = [f"{str(exc)[:1].upper()}{str(exc)[1:]}."]
    per_dataset = data.get("dataset_freshness", current.dataset_freshness) or {}
    if isinstance(per_dataset, str):
        per_dataset = _dataset_lines(per_dataset, errors)
    if not isinstance(per_dataset, dict):
        errors["dataset_freshness"] = ['A map of dataset.urn to goal, e.g. {"public.orders": "by 06:00"}.']
        per_dataset = {}
    problems = []
    for dataset, text in per_dataset.items():
        if not isinstance(dataset, str) or not dataset.strip() or len(dataset) > 500:
            problems.append(f"{dataset!r}: a dataset.urn of 1 to 500 characters.")
        elif not isinstance(text, str):
            problems.append(f'{dataset}: a goal such as "within 2h" or "by 06:00".')
        else:
            try:
                goals[dataset.strip()] = parse_goal(text)
            except ValueError as exc:
                problems.append(f"{dataset}: {exc}.")
    if len(per_dataset) > MAX_UPSTREAMS:
        problems.append(f"At most {MAX_UPSTREAMS} datasets.")
    if problems:
        errors.setdefault("dataset_freshness", []).extend(problems)
    upstreams = _upstream_flows(flow, upstream, errors)
    if errors:
        raise ValidationError(errors)
    chosen = TriggerSettings(
        upstream=upstream,
        upstream_mode=mode,
        debounce_seconds=debounce,
        skip_empty=skip_empty,
        on_files=on_files,
        freshness=freshness,
        dataset_freshness={k: v for k, v in per_dataset.items() if k},
    )
    return chosen, upstreams, goals


_DATASET_LINE = re.compile(
    r"^(?P<dataset>.+?)\s*:\s*(?P<goal>(?:within\s+)?\d+\s*(?:m|min|h|d)|(?:by\s+)?\d{1,2}:\d{2})\s*$",
    re.IGNORECASE,
)


def _dataset_lines(text: str, errors: dict[str, list[str]]) -> dict[str, str]:
    """The form's lines `<dataset.urn>: <goal>` as a map."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        if match := _DATASET_LINE.match(line.strip()):
            found[match["dataset"]] = match["goal"]
        else:
            errors.setdefault("dataset_freshness", []).append(
                f"{line.strip()!r}: write <dataset.urn>: <goal>, e.g. public.orders: by 06:00."
            )
    return found


def save_settings(flow: FlowConfig, data: dict[str, Any]) -> TriggerSettings:
    """Validate and store the flow's triggers and freshness goal together."""
    chosen, upstreams, goals = validate(flow, data)
    now = timezone.now()
    with transaction.atomic():
        trigger = FlowTrigger.objects.select_for_update().filter(flow=flow).first()
        if trigger is None and (upstreams or chosen.on_files):
            trigger = FlowTrigger.objects.create(flow=flow)
        if trigger is not None:
            _store_triggers(trigger, chosen, upstreams, now)
        _store_goals(flow, goals, now)
    return settings_of(flow)


def _store_triggers(
    trigger: FlowTrigger, chosen: TriggerSettings, upstreams: list[tuple[FlowConfig, str]], now: datetime
) -> None:
    trigger.upstream_mode = chosen.upstream_mode
    trigger.debounce_seconds = chosen.debounce_seconds
    trigger.skip_empty = chosen.skip_empty
    if chosen.on_files and not trigger.on_files:
        # Files already there when the watch starts are not "arrivals".
        trigger.files_mark_ms, trigger.files_check_at = -1, now
    trigger.on_files = chosen.on_files
    if not upstreams:
        trigger.fire_at = None
    trigger.save()
    kept = []
    for upstream, dataset in upstreams:
        row, _ = UpstreamDataset.objects.get_or_create(trigger=trigger, upstream=upstream, dataset=dataset)
        kept.append(row.pk)
    UpstreamDataset.objects.filter(trigger=trigger).exclude(pk__in=kept).delete()


def _store_goals(flow: FlowConfig, goals: dict[str, tuple[int | None, time | None]], now: datetime) -> None:
    """Keep the goals asked for (one changed counts again from its last commit, or from now)."""
    existing = {goal.dataset: goal for goal in FreshnessGoal.objects.select_for_update().filter(flow=flow)}
    FreshnessGoal.objects.filter(pk__in=[g.pk for d, g in existing.items() if d not in goals]).delete()
    for dataset, (within, daily_by) in goals.items():
        goal = existing.get(dataset)
        if goal is not None and (goal.within_seconds, goal.daily_by) == (within, daily_by):
            continue
        since = goal.last_commit_at if goal is not None else None
        due = next_due(within, daily_by, since) if since else first_due(within, daily_by, now)
        FreshnessGoal.objects.update_or_create(
            flow=flow,
            dataset=dataset,
            defaults={
                "within_seconds": within,
                "daily_by": daily_by,
                "due_at": max(due, now),
                "stale_since": None,
            },
        )


def create_webhook_token(flow: FlowConfig) -> str:
    """A new webhook token (an earlier one stops working); the caller shows it once."""
    with transaction.atomic():
        trigger, _ = FlowTrigger.objects.select_for_update().get_or_create(flow=flow)
        token = trigger.new_webhook_token()
        trigger.save(update_fields=["webhook_token_hash", "webhook_token_hint", "webhook_created"])
    return token


def revoke_webhook_token(flow: FlowConfig) -> bool:
    return bool(
        FlowTrigger.objects.filter(flow=flow)
        .exclude(webhook_token_hash="")
        .update(webhook_token_hash="", webhook_token_hint="", webhook_created=None)
    )


def feeds(flow: FlowConfig) -> list[FlowConfig]:
    """The flows that wait for this one's datasets (its page says "feeds …")."""
    return list(
        FlowConfig.objects.filter(data_trigger__upstreams__upstream=flow)
        .distinct()
        .order_by("flow_group", "flow_name")
    )


def runs_when(flow: FlowConfig) -> list[str]:
    """What starts the flow besides its schedule, in words (its page says "runs when …")."""
    found = settings_of(flow)
    lines = []
    if found.upstream:
        names = ", ".join(found.upstream)
        if len(found.upstream) == 1:
            lines.append(f"{names} commits")
        elif found.upstream_mode == FlowTrigger.Mode.ALL:
            lines.append(f"all of {names} have committed since its last such run")
        else:
            lines.append(f"any of {names} commits")
        if found.skip_empty:
            lines[-1] += " with at least one record (an empty commit does not count)"
        if found.debounce_seconds:
            lines[-1] += f", {found.debounce_seconds} s after the last commit (debounce)"
    if found.on_files:
        lines.append(f"new files arrive in its source folder ({flow.source})")
    if found.webhook:
        lines.append(f"its webhook is called with its token ({found.webhook_hint}…)")
    return lines
