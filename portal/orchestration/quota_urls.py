"""The quotas pages (/quotas/)."""

from django.urls import path

from portal.orchestration import quota_views

app_name = "quotas"
urlpatterns = [
    path("", quota_views.usage, name="usage"),
    path("new/", quota_views.quota_create, name="create"),
    path("<int:pk>/edit/", quota_views.quota_edit, name="edit"),
    path("<int:pk>/delete/", quota_views.quota_delete, name="delete"),
]
