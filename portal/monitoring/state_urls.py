"""Pages of the state store (watermarks, their history, audited resets).
Mounted by portal/urls.py under `state/`."""

from django.urls import path

from portal.monitoring import state_views

app_name = "state"
urlpatterns = [
    path("", state_views.dataset_list, name="list"),
    path("<int:pk>/", state_views.dataset_detail, name="dataset"),
]
