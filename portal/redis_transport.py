"""kombu's Redis transport, with the channel able to settle its messages
after the broker connection it came from has been closed.

Why: when Redis goes away while an `acks_late` job runs, the
Celery consumer calls `Connection.collect()` and then `Connection.close()`.
`collect()` closes the default channel, but the channel's `close()` stops at
its first step (reading the pending BRPOP fails: the server is gone), so the
channel stays open, and `collect()` then detaches the transport
(`transport.client = None`). `close()` closes the same channel again; this
time it gets as far as restoring its unacknowledged messages, and building a
Redis client for that reads `transport.client.hostname`: an AttributeError,
which is no connection error, so Celery calls it unrecoverable and the worker
exits. The same happens when a job that was running through the outage
finishes and acknowledges its message on the old channel.

kombu 5.7.0 has no fix for this. The channel here remembers the connection
parameters it was made with, so a channel whose transport has been detached
still reaches the broker: its restore and late acknowledgements go through
when Redis is back, and fail with Redis's own ConnectionError (which Celery
and kombu handle) while it is not. The message the job holds stays in
Redis's unacked index until then, and the executor's claim makes any
redelivery of it a no-op.

Selected by CELERY_BROKER_TRANSPORT in portal/settings.py for redis:// and
rediss:// broker URLs.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _saved_connparams: dict[bool, dict[str, Any]]

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        saved = self.__dict__.setdefault("_saved_connparams", {})
        transport = self.connection
        if transport is None or transport.client is None:
            # Either flavour names the same server (the channel's __init__
            # always makes the asynchronous one).
            params = saved.get(asynchronous) or next(iter(saved.values()), None)
            if params is None:
                raise kombu_redis.get_redis_ConnectionError()(
                    "this broker channel's connection is closed and it never connected"
                )
            return dict(params)
        params = super()._connparams(asynchronous=asynchronous)
        saved[asynchronous] = dict(params)
        return params


class Transport(kombu_redis.Transport):
    Channel = Channel

    @property
    def supports_batch_publish(self) -> bool:  # the same gap: client None after close
        if self.client is None:
            return False
        return super().supports_batch_publish
