from django.urls import path

from portal.flows import views
from portal.flows.triggers import views as trigger_views
from portal.flows.versions import views as version_views

app_name = "flows"
urlpatterns = [
    path("", views.flow_list, name="list"),
    # One view and template for both; the form's htmx parts post to the same URL with ?part=.
    path("new/", views.flow_form, name="create"),
    path("<str:flow_group>/<str:flow_name>/", views.flow_detail, name="detail"),
    path("<str:flow_group>/<str:flow_name>/edit/", views.flow_form, name="edit"),
    path("<str:flow_group>/<str:flow_name>/pause/", views.flow_pause, {"paused": True}, name="pause"),
    path("<str:flow_group>/<str:flow_name>/resume/", views.flow_pause, {"paused": False}, name="resume"),
    path("<str:flow_group>/<str:flow_name>/delete/", views.flow_delete, name="delete"),
    path("<str:flow_group>/<str:flow_name>/triggers/", trigger_views.flow_triggers, name="triggers"),
    path(
        "<str:flow_group>/<str:flow_name>/webhook-token/",
        trigger_views.flow_webhook_token,
        name="webhook_token",
    ),
    path("<str:flow_group>/<str:flow_name>/versions/", version_views.flow_versions, name="versions"),
]
