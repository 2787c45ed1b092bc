"""The outbox relay against the configured broker (Redis in `make test`)."""

from __future__ import annotations

import uuid

import pytest

from portal.celery import app
from portal.orchestration.control import outbox
from portal.orchestration.models import OutboxMessage
from tests.ports import free_port

pytestmark = pytest.mark.django_db


def test_the_relay_sends_unsent_messages_in_order_and_marks_them_sent():
    queue = f"test.outbox.{uuid.uuid4().hex[:8]}"
    first = outbox.add_message(queue, "flowport.run_job", {"job_id": 1, "attempt": 1, "jobspec": {}})
    second = outbox.add_message(queue, "flowport.run_job", {"job_id": 2, "attempt": 1, "jobspec": {}})
    assert outbox.backlog() == 2

    assert outbox.relay_outbox() == 2

    assert outbox.backlog() == 0
    assert all(m.sent_at for m in OutboxMessage.objects.filter(pk__in=[first.pk, second.pk]))
    with app.connection_for_read() as connection:
        received = connection.SimpleQueue(queue)
        try:
            bodies = [received.get(timeout=5) for _ in range(2)]
            job_ids = [message.payload[1]["job_id"] for message in bodies]
            for message in bodies:
                message.ack()
        finally:
            received.close()
    assert job_ids == [1, 2]


def test_a_sent_message_is_not_sent_again():
    queue = f"test.outbox.{uuid.uuid4().hex[:8]}"
    outbox.add_message(queue, "flowport.run_job", {"job_id": 3, "attempt": 1, "jobspec": {}})
    assert outbox.relay_outbox() == 1
    assert outbox.relay_outbox() == 0


def test_a_broker_that_refuses_connections_leaves_the_message_for_later(monkeypatch):
    closed = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    monkeypatch.setattr(outbox, "_connection", lambda: app.connection_for_write(closed))
    message = outbox.add_message("test.outbox.down", "flowport.run_job", {"job_id": 4, "attempt": 1})

    assert outbox.relay_outbox() == 0

    message.refresh_from_db()
    assert message.sent_at is None and message.attempts == 1
    assert "Connection refused" in message.last_error and message.next_attempt_at
