"""Reading an ``Observation``'s metrics without risking a hang.

``Observation.get`` blocks until the observed plan ran; when the optimizer pruned the plan (a branch
whose route is constant false) or the pass was abandoned, the metrics never fill in properly.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import Observation


def observed(obs: Observation, timeout: float = 120.0) -> dict[str, Any]:
    """The metrics of ``obs``; nothing (all counts 0) when its plan did not complete in ``timeout``
    seconds or holds no row.  Polls the JVM future instead of blocking on it."""
    jo = getattr(obs, "_jo", None)
    if jo is None:
        return {}
    deadline = time.time() + timeout
    future = jo.future()
    while not future.isCompleted():
        if time.time() > deadline:
            return {}
        time.sleep(0.01)
    try:
        return dict(obs.get)
    except Exception:
        return {}
