"""The control plane: the scheduler process. Cron ticks and triggers become executions, requests
become action rows, the orchestrator handles them, the outbox sends the jobs to the workers'
queues (by Celery task name, never by importing the worker), and the sweeps watch the workers'
liveness and quotas. Imports the dataset state below it, never the worker above."""
