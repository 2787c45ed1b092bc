"""Actions as rows. Nothing acts directly on an execution: the API, the
scheduler, workers and monitors insert an Action, and any portal process
claims due actions (a conditional UPDATE that only one claimer wins; a lease
that expires so a dead claimer's action is retaken) and hands them to the
orchestrator. Handlers are idempotent, so a retaken action is safe."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.orchestration.models import Action, ActionKind, FlowExecution

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5

Handler = Callable[[Action], None]
_handlers: dict[str, Handler] = {}


def handles(kind: str) -> Callable[[Handler], Handler]:
    """Register the orchestrator's handler of one action kind."""

    def register(func: Handler) -> Handler:
        _handlers[kind] = func
        return func

    return register


def process_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def enqueue(
    kind: str,
    *,
    flow_group: str,
    flow_name: str,
    execution_id: int,
    job_name: str = "",
    due_at: datetime | None = None,
    payload: dict[str, Any] | None = None,
) -> None:
    """Insert an action; the same request already waiting is not repeated."""
    Action.objects.bulk_create(
        [
            Action(
                kind=kind,
                flow_group=flow_group,
                flow_name=flow_name,
                execution_id=execution_id,
                job_name=job_name,
                due_at=due_at or timezone.now(),
                payload=payload or {},
            )
        ],
        ignore_conflicts=True,
    )


def enqueue_for(
    execution: FlowExecution,
    kind: str,
    *,
    job_name: str = "",
    due_at: datetime | None = None,
    payload: dict[str, Any] | None = None,
) -> None:
    enqueue(
        kind,
        flow_group=execution.flow_group,
        flow_name=execution.flow_name,
        execution_id=execution.execution_id,
        job_name=job_name,
        due_at=due_at,
        payload=payload,
    )


def _claim(limit: int, claimer: str) -> list[Action]:
    now = timezone.now()
    lease = now + timedelta(seconds=settings.ORCHESTRATOR_ACTION_LEASE_SECONDS)
    due = (
        Action.objects.filter(done_at__isnull=True, due_at__lte=now)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .order_by("due_at", "id")
    )
    claimed: list[Action] = []
    with transaction.atomic():
        for action in due.select_for_update(skip_locked=True)[:limit]:
            # The conditional UPDATE settles races where row locks do not
            # exist (SQLite): only one claimer sees a row count of 1.
            won = (
                Action.objects.filter(pk=action.pk, done_at__isnull=True)
                .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
                .update(claimed_by=claimer, lease_until=lease, attempts=action.attempts + 1)
            )
            if won:
                action.claimed_by, action.lease_until, action.attempts = claimer, lease, action.attempts + 1
                claimed.append(action)
    return claimed


def _handle(action: Action, claimer: str) -> None:
    handler = _handlers.get(action.kind)
    try:
        with transaction.atomic():
            if handler is None:
                raise LookupError(f"no handler for action {action.kind}")
            handler(action)
            Action.objects.filter(pk=action.pk, claimed_by=claimer).update(done_at=timezone.now())
    except Exception as exc:
        logger.exception("action %s failed (attempt %d)", action, action.attempts)
        fields: dict[str, Any] = {"last_error": f"{type(exc).__name__}: {exc}"[:2000], "claimed_by": claimer}
        if action.attempts >= MAX_ATTEMPTS:
            fields["done_at"] = timezone.now()
        else:
            fields["lease_until"] = timezone.now() + timedelta(seconds=2**action.attempts)
        Action.objects.filter(pk=action.pk).update(**fields)


def process_actions(limit: int = 50, claimer: str | None = None) -> int:
    """Claim and handle due actions; returns how many were handled."""

    claimer = claimer or process_id()
    actions = _claim(limit, claimer)
    for action in actions:
        _handle(action, claimer)
    return len(actions)


__all__ = ["ActionKind", "enqueue", "enqueue_for", "handles", "process_actions"]
