"""Sources for orchestration tests, loaded by the worker by dotted path.

`CountingSource` emits the next `numbers.per.run` integers as column `id`
(watermark = last id). `slow.seconds.per.row` makes each row take that long
unless the file named by `slow.release.file` exists, so a test can hold a job
RUNNING and let it go. `flaky.marker.file`: the first attempt fails (and
creates the file), later ones succeed — a transient failure.
`hard.exit.code`: the worker process ends on the spot (os._exit), as a job
whose native code crashes its worker would; `interrupt.message`: the job
raises KeyboardInterrupt (a BaseException, not an Exception);
`block.until.file`: the job sits in plain Python, deaf to cancellation, until
that file exists (a wedged job thread); it creates `block.entered.file` first.
"""

from __future__ import annotations

import os
import time

from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from portal.pipeline.sources.base import Extraction, Source
from portal.pipeline.workunits import WorkUnit


class CountingSource(Source):
    def get_work_units(self) -> list[WorkUnit]:
        if self.props.get("hard.exit.code"):
            os._exit(int(self.props.get("hard.exit.code")))
        if self.props.get("interrupt.message"):
            raise KeyboardInterrupt(self.props.get("interrupt.message"))
        unblock = self.props.get("block.until.file")
        if unblock and self.props.get("block.entered.file"):  # says when the job is deaf
            open(self.props.get("block.entered.file"), "w").close()
        while unblock and not os.path.exists(unblock):
            time.sleep(0.2)
        marker = self.props.get("flaky.marker.file")
        if marker and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("transient failure: the source was unreachable")
        low = self.previous_watermark("numbers")
        start = int(low or 0)
        high = start + (self.props.get_int("numbers.per.run", 10) or 10)
        return [WorkUnit("numbers", low, str(high), estimated_bytes=8 * (high - start))]

    def extract(self, wu: WorkUnit) -> Extraction:
        start = int(wu.low_watermark or 0)
        df = self.spark.range(start + 1, int(wu.expected_high_watermark) + 1, numPartitions=2)
        delay = self.props.get_float("slow.seconds.per.row", 0.0) or 0.0
        release = self.props.get("slow.release.file") or ""
        if delay:

            def slow(value: int) -> int:
                if not (release and os.path.exists(release)):
                    time.sleep(delay)
                return value

            df = df.select(F.udf(slow, LongType())("id").alias("id"))
        return Extraction(df)
