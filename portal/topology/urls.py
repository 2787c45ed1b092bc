"""Pages of the topology app."""

from django.urls import path

from portal.topology import catalog_views, views

app_name = "topology"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("source-picker/", views.source_picker, name="source_picker"),
    path("executors/new/", views.executor_create, name="executor_create"),
    path("executors/<str:name>/", views.executor_detail, name="executor"),
    path("executors/<str:name>/edit/", views.executor_edit, name="executor_edit"),
    path("executors/<str:name>/toggle/", views.executor_toggle, name="executor_toggle"),
    path("executors/<str:name>/disable/", views.executor_disable, name="executor_disable"),
    path("executors/<str:name>/delete/", views.executor_delete, name="executor_delete"),
    path("executors/<str:name>/capabilities/", views.capability_add, name="capability_add"),
    path(
        "executors/<str:name>/capabilities/<int:pk>/remove/",
        views.capability_remove,
        name="capability_remove",
    ),
    path("datanodes/", catalog_views.datanode_list, name="datanode_list"),
    path("datanodes/new/", views.datanode_create, name="datanode_create"),
    path("datanodes/<str:name>/", views.datanode_detail, name="datanode"),
    path("datanodes/<str:name>/test/", views.datanode_test, name="datanode_test"),
    path("datanodes/<str:name>/discover/", views.datanode_discover, name="datanode_discover"),
    path("datanodes/<str:name>/edit/", views.datanode_edit, name="datanode_edit"),
    path("datanodes/<str:name>/delete/", views.datanode_delete, name="datanode_delete"),
    path("datanodes/<str:name>/grants/", views.datanode_grant, name="datanode_grant"),
    path("datanodes/<str:name>/grants/<int:grant_id>/revoke/", views.datanode_revoke, name="datanode_revoke"),
    path(
        "datanodes/<str:name>/request-access/", views.datanode_request_access, name="datanode_request_access"
    ),
    path(
        "datanodes/<str:name>/access-requests/<int:request_id>/",
        views.datanode_answer_request,
        name="datanode_answer_request",
    ),
]
