"""The monitoring app's root-level URL: the Prometheus endpoint at /metrics
(Prometheus' default metrics_path). portal/urls.py mounts it with
`path("", include("portal.monitoring.root_urls"))`; the same view also
answers at /monitoring/metrics."""

from django.urls import path

from portal.monitoring import views

urlpatterns = [
    path("metrics", views.metrics_view, name="metrics"),
]
