"""Orchestration's signals (Django signals: the project's one listener mechanism).

`job_run_changed` is sent inside the transaction that moves a job attempt to
RUNNING (a worker claimed it) or ends it (COMMITTED, FAILED, CANCELLED, or
FAILED when its worker died); receivers get `job` (its `execution` loaded),
`status`, `attempt` and `task_states` (the run's TaskStates when it ended on a
worker's report, else None). The lineage receiver (orchestration.control.receivers)
turns these into OpenLineage run events."""

from django.dispatch import Signal

job_run_changed = Signal()
