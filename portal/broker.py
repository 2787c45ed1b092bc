"""The embedded broker: kombu's SQLAlchemy transport, made safe for several
processes sharing one SQLite file.

`make run` needs a broker with no server, and every process of the stack
declares queues on it: the worker at start-up, the scheduler's outbox relay
and the web tier on each dispatch, and any executor added later at run time.
kombu's transport guards "create the queue unless it exists" and "create the
tables" with a lock of its own process only, so two processes declaring one
queue at once collide on ``UNIQUE(kombu_queue.name)`` and the loser dies with
an ``IntegrityError`` (seen: the worker at start-up while the relay sent the
demo flow's first job). This subclass lets the database arbitrate: the loser
of a creation race reads back the winner's row. For SQLite it also waits for
the file's write lock instead of failing after five seconds, and uses WAL so
that the consumers' polling never blocks a publisher.

`portal.celery` registers it under kombu's own ``sqla``/``sqlalchemy`` names,
so every URL of that scheme gets it, whoever writes it."""

from __future__ import annotations

from typing import Any

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import sqlalchemy as kombu_sqla
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError

# Seconds a process waits for SQLite's write lock before it reports the broker busy.
SQLITE_BUSY_SECONDS = 30
# Rounds of "read, else create" before giving up: each lost race is followed
# by a read that sees the winner's row, so a second round is already rare.
CREATE_ROUNDS = 5


class Channel(kombu_sqla.Channel):
    def _engine_from_config(self) -> Engine:
        engine = super()._engine_from_config()
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _tune_sqlite)
        return engine

    def _open(self) -> tuple[Engine, Any]:
        # The first process to open a new broker file creates its tables;
        # one that checked for them just before loses the race with
        # "table … already exists". Its second look finds them.
        for _ in range(CREATE_ROUNDS - 1):
            try:
                return super()._open()
            except OperationalError as exc:
                if "already exists" not in str(exc):
                    raise
        return super()._open()  # the last try's error, if any, is the answer

    def _get_or_create(self, queue: str) -> Any:
        model = self.queue_cls
        for _ in range(CREATE_ROUNDS):
            found = self.session.query(model).filter(model.name == queue).first()
            if found is not None:
                return found
            created = model(queue)
            self.session.add(created)
            try:
                self.session.commit()
            except IntegrityError:  # another process created it first: read it back
                self.session.rollback()
                continue
            return created
        raise OperationalError(f"declaring queue {queue!r}", None, Exception("creation kept racing"))


class Transport(kombu_sqla.Transport):
    Channel = Channel


def _tune_sqlite(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_SECONDS * 1000}")
        cursor.execute("PRAGMA journal_mode = WAL")
    finally:
        cursor.close()


def register() -> None:
    """Make kombu's own URL schemes for the SQLAlchemy transport use this one."""
    for alias in ("sqla", "sqlalchemy"):
        TRANSPORT_ALIASES[alias] = f"{__name__}:Transport"
