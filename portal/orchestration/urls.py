"""Pages of the orchestration app, mounted at /executions/: a flow's
executions are `<flowGroup>/<flowName>/`, one execution is
`<flowGroup>/<flowName>/<executionId>/` (the id is all digits, so the two
never meet)."""

from django.urls import path

from portal.orchestration import sparkui_views, views

app_name = "orchestration"
urlpatterns = [
    path("", views.execution_list, name="list"),
    path("<str:flow_group>/<str:flow_name>/<int:execution_id>/", views.execution_detail, name="execution"),
    path("<str:flow_group>/<str:flow_name>/<int:execution_id>/kill/", views.execution_kill, name="kill"),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/resume/", views.execution_resume, name="resume"
    ),
    path("<str:flow_group>/<str:flow_name>/<int:execution_id>/rerun/", views.execution_rerun, name="rerun"),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/jobs/<str:job_name>/log/",
        views.job_log,
        name="job_log",
    ),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/jobs/<str:job_name>/rerun/",
        views.job_rerun,
        name="job_rerun",
    ),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/jobs/<str:job_name>/log/download/",
        views.job_log_download,
        name="job_log_download",
    ),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/jobs/<str:job_name>/bad-records/",
        views.job_bad_records,
        name="job_bad_records",
    ),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/jobs/<str:job_name>/outputs/<int:index>/",
        views.dataset_preview,
        name="preview",
    ),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/jobs/<str:job_name>/spark-ui/",
        sparkui_views.spark_ui,
        name="spark_ui",
    ),
    path(
        "<str:flow_group>/<str:flow_name>/<int:execution_id>/jobs/<str:job_name>/spark-ui/<path:path>",
        sparkui_views.spark_ui,
        name="spark_ui_path",
    ),
    path("<str:flow_group>/<str:flow_name>/", views.flow_executions, name="flow_executions"),
    path("<str:flow_group>/<str:flow_name>/run/", views.flow_run, name="run"),
    path("<str:flow_group>/<str:flow_name>/backfill/", views.flow_backfill, name="backfill"),
]
