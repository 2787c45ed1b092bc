"""The transactional outbox: a Celery message is written as a row in the
same transaction as the rows it is about, and the relay sends it afterwards.
A broker outage only delays dispatch; nothing is lost, and a message sent
twice (relay died after sending, before marking) is harmless because the
worker deduplicates by (execution, job, attempt)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.celery import app
from portal.orchestration.models import OutboxMessage

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 5


def add_message(queue: str, task_name: str, kwargs: dict[str, Any]) -> OutboxMessage:
    """Call inside the transaction that writes the rows the message is about."""
    message = OutboxMessage.objects.create(queue=queue, task_name=task_name, kwargs=kwargs)
    # Relay as soon as the transaction commits, so dispatch does not wait for
    # the next poll; the poll still catches anything this misses.
    transaction.on_commit(relay_outbox)
    return message


def _connection() -> Any:
    """A fresh broker connection for one batch. Not the app's pooled one: a
    pooled connection outlives a broker restart with its memory of which
    queues it declared, and its reconnect policy could hold the orchestrator
    loop; a fresh one declares the queue again and fails within the
    connect timeout (CELERY_BROKER_CONNECTION_TIMEOUT)."""

    return app.connection_for_write()


def _send(message: OutboxMessage, producer: Any) -> None:
    app.send_task(
        message.task_name,
        kwargs=message.kwargs,
        queue=message.queue,
        routing_key=message.queue,
        retry=False,
        producer=producer,  # send_task ignores connection=; a producer on it is what it uses
    )


def relay_outbox(limit: int = 200) -> int:
    """Send due, unsent messages in id order; stop at the first broker error
    (the broker is down: the rest would fail too). Returns how many were sent."""
    now = timezone.now()
    sent = 0
    with transaction.atomic():
        batch = list(
            OutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(sent_at__isnull=True)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
            .order_by("id")[:limit]
        )
        if not batch:
            return 0
        connection = _connection()
        try:
            sent = _relay(batch, connection)
        finally:
            # A broker that died mid-batch can make closing fail too; that must
            # not roll back what this batch recorded (sent marks, last errors).
            try:
                connection.release()
            except Exception:
                logger.debug("outbox: closing the broker connection failed", exc_info=True)
    return sent


def _relay(batch: list[OutboxMessage], connection: Any) -> int:
    sent, producer = 0, None
    for message in batch:
        try:
            producer = producer or app.amqp.Producer(connection)  # connects
            _send(message, producer)
        except Exception as exc:  # the broker's errors have no common base class
            message.attempts += 1
            message.last_error = f"{type(exc).__name__}: {exc}"[:1000]
            delay = min(MAX_BACKOFF_SECONDS, 0.25 * 2**message.attempts)
            message.next_attempt_at = timezone.now() + timedelta(seconds=delay)
            message.save(update_fields=["attempts", "last_error", "next_attempt_at"])
            logger.warning("outbox: broker unavailable, %s will be retried: %s", message, exc)
            break
        message.sent_at = timezone.now()
        message.save(update_fields=["sent_at"])
        sent += 1
    return sent


def backlog() -> int:
    return OutboxMessage.objects.filter(sent_at__isnull=True).count()
