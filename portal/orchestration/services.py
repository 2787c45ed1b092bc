"""What the pages, the API and the other apps ask of orchestration, in one place. The logic lives
in the rooms: requests to the control plane (run now, re-run, kill, resume) in
`control.commands`, what a backfill range meets in the dataset state in `state.backfills`."""

from __future__ import annotations

from portal.orchestration.control.commands import (
    CURRENT,
    RAN,
    RERUNNABLE_JOB_STATUSES,
    NotAllowedNow,
    can_kill,
    can_rerun_job,
    can_resume,
    execution_in_the_way,
    kill,
    relaunch_waiting,
    rerun_execution,
    rerun_job,
    resume,
    run_now,
    skipped_because,
)
from portal.orchestration.state.backfills import backfill_estimate, backfill_preview, backfill_refusal

__all__ = [
    "CURRENT",
    "RAN",
    "RERUNNABLE_JOB_STATUSES",
    "NotAllowedNow",
    "backfill_estimate",
    "backfill_preview",
    "backfill_refusal",
    "can_kill",
    "can_rerun_job",
    "can_resume",
    "execution_in_the_way",
    "kill",
    "relaunch_waiting",
    "rerun_execution",
    "rerun_job",
    "resume",
    "run_now",
    "skipped_because",
]
