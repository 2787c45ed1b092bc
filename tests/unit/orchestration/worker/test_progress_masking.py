"""A job's progress names its work units after their datasets, and every user may read it (the
execution API and pages): the heartbeat masks in it the secrets the job decrypted, as in the log."""

from __future__ import annotations

from portal.crypto.encrypted import REDACTED
from portal.orchestration.worker.heartbeat import masked


def test_a_work_unit_named_after_a_decrypted_secret_is_masked():
    progress = {
        "job_name": "mal.grab.1-landing-to-lake",
        "fraction": 0.5,
        "work_units": [
            {"task_id": "task_1", "dataset_urn": "team-db-password", "status": "RUNNING"},
            {"task_id": "task_2", "dataset_urn": "orders", "status": "PENDING"},
        ],
    }
    shown = masked(progress, {"team-db-password"})
    assert [unit["dataset_urn"] for unit in shown["work_units"]] == [REDACTED, "orders"]
    assert shown["fraction"] == 0.5 and shown["job_name"] == progress["job_name"]


def test_a_job_without_secrets_shows_its_progress_as_it_is():
    progress = {"work_units": [{"dataset_urn": "orders"}]}
    assert masked(progress, set()) is progress
