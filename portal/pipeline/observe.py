"""Counting on the way: what a branch's write observes, and reading an ``Observation``'s metrics
without risking a hang.

``Observation.get`` blocks until the observed plan ran; when the optimizer pruned the plan (a branch
whose route is constant false) or the pass was abandoned, the metrics never fill in properly.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from portal.pipeline.quality import RowChecker

WRITTEN = "fp_written"  # the metric of the rows a branch wrote


def observe_written(tagged: DataFrame, checker: RowChecker) -> tuple[DataFrame, Observation]:
    """``tagged`` (rows tagged by a branch's row ``checker``) observed for the rows the branch writes
    (:data:`WRITTEN`) and its row policies' counts, on the write's own read."""
    obs = Observation()
    written = (
        F.count(F.lit(1))
        if not checker.active
        else F.sum(F.when(F.col("fp_reject_index").isNull(), 1).otherwise(0))
    )
    metrics = [written.alias(WRITTEN)] + [c.alias(n) for n, c in checker.metrics("row").items()]
    return tagged.observe(obs, *metrics), obs


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
