"""Pages of the monitoring app, mounted at /monitoring/."""

from django.urls import path

from portal.monitoring import slot_views, views

app_name = "monitoring"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("start/", views.start, name="start"),
    path("flows/<str:flow_group>/<str:flow_name>/chart/", views.flow_chart, name="flow_chart"),
    path(
        "datasets/<str:flow_group>/<str:flow_name>/<str:job_name>/<path:dataset_urn>/",
        views.dataset,
        name="dataset",
    ),
    path("flows/<str:flow_group>/<str:flow_name>/slot/", slot_views.flow_slot, name="flow_slot"),
    path(
        "flows/<str:flow_group>/<str:flow_name>/resnapshot/",
        slot_views.flow_resnapshot,
        name="flow_resnapshot",
    ),
    path(
        "flows/<str:flow_group>/<str:flow_name>/subscription/",
        views.flow_subscription,
        name="flow_subscription",
    ),
    path(
        "subscriptions/<int:subscription_id>/delete/", views.subscription_delete, name="subscription_delete"
    ),
    path("metrics", views.metrics_view, name="metrics"),
]
