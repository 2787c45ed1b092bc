"""portal/urls.py with /metrics at the root, as `path("",
include("portal.monitoring.root_urls"))` does it, and the dashboard as the
home page."""

from django.urls import include, path

from portal import urls as portal_urls
from portal.monitoring import views

urlpatterns = [
    path("", views.dashboard, name="home"),
    path("", include("portal.monitoring.root_urls")),
    *(p for p in portal_urls.urlpatterns if getattr(p, "name", None) != "home"),
]
