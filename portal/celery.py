"""The Celery app. Each SpecExecutor is a worker consuming its own queue:
`celery -A portal.celery worker -Q <executor queue>`."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
