"""The Celery app. Each SpecExecutor is a worker consuming its own queue:
`celery -A portal.celery worker -Q <executor queue>`."""

import os

from celery import Celery

from portal import broker

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

broker.register()  # before any connection: the embedded broker's transport, safe across processes
app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
