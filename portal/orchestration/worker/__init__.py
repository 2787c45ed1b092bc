"""The worker: the Celery process that runs jobs. What one JobSpec becomes (executor), the job's
guard, heartbeat and figures, the worker's long-lived SparkSession or its spark-submit, and the
process's own life signs and capacity. It answers the control plane through action rows
(`control.actions`), the one way up; the control plane reaches it only by Celery task name."""
