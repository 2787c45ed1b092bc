"""The queues of the stacks the integration and browser stories start (a worker consumes
each but the idle one)."""

INGEST_QUEUE = "it.ingest"
REPLICATE_QUEUE = "it.replicate"
E2E_INGEST_QUEUE = "e2e.ingest"  # the "ingest" executor: landing → lake
LATE_QUEUE = "e2e.late"  # the executor an admin adds during a test: lake → archive
IDLE_QUEUE = "e2e.idle"  # the "idle" executor (landing → cold): no worker consumes it
