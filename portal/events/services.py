"""Raising events. One function, so every producer (orchestrator, SLA and
health monitors) records them the same way; the sinks are told after the
caller's transaction commits, and never hold it up."""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from portal.events import sinks
from portal.events.models import Event

logger = logging.getLogger("portal.events")
# An event's log line at its own severity (an execution that succeeded is no warning).
_LEVELS: dict[str, int] = {
    Event.Severity.INFO: logging.INFO,
    Event.Severity.WARNING: logging.WARNING,
    Event.Severity.ERROR: logging.ERROR,
}


def raise_event(
    kind: str,
    message: str,
    *,
    severity: str = Event.Severity.WARNING,
    dedupe_key: str = "",
    **where: object,
) -> Event | None:
    """Store an event (inside the caller's transaction) and log it. With a
    `dedupe_key` an event already raised under that key is not repeated and
    None is returned."""
    if dedupe_key:
        try:
            with transaction.atomic():  # a savepoint: a duplicate must not spoil the caller's transaction
                event = Event.objects.create(
                    kind=kind, message=message, severity=severity, dedupe_key=dedupe_key[:400], **where
                )
        except IntegrityError:
            return None
    else:
        event = Event.objects.create(kind=kind, message=message, severity=severity, **where)
    logger.log(_LEVELS.get(severity, logging.WARNING), "%s: %s", kind, message)
    transaction.on_commit(_kick_sinks)
    return event


def _kick_sinks() -> None:
    try:
        sinks.kick()
    except Exception:  # forwarding is best effort; the event is stored
        logger.exception("could not wake the event sinks")
