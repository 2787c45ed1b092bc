"""Flowport: the self-service data-integration portal.

Deliberately empty: `portal.pipeline` ships to Spark clusters without Django or
Celery, so importing the `portal` package must not pull either in. The Celery
app is loaded by `portal.orchestration.apps` when Django starts.
"""
