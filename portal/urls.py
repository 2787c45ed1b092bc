"""URL map: each app brings its pages (`<app>/urls.py`) and its API (`<app>/api.py`)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from portal.accounts import api as accounts_api
from portal.accounts import views as accounts_views
from portal.flows import api as flows_api
from portal.flows import compile_api as flows_compile_api
from portal.flows import views as flows_views
from portal.keys import api as keys_api
from portal.monitoring import api as monitoring_api
from portal.orchestration import api as orchestration_api
from portal.templatepacks import api as templatepacks_api
from portal.topology import api as topology_api
from portal.topology import connections_api as topology_connections_api

api_urlpatterns = [
    *flows_compile_api.urlpatterns,
    *flows_api.urlpatterns,
    *accounts_api.urlpatterns,
    *templatepacks_api.urlpatterns,
    *topology_connections_api.urlpatterns,
    *topology_api.urlpatterns,
    *orchestration_api.urlpatterns,
    *keys_api.urlpatterns,
    *monitoring_api.urlpatterns,
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
]

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="monitoring:dashboard", permanent=False), name="home"),
    path("login/", accounts_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("flows/", include("portal.flows.urls")),
    path("account/", include("portal.accounts.urls")),
    # A pack's flows: the flow catalog answers under the pack's address.
    path("packs/<str:name>/flows/", flows_views.pack_flows, name="pack_flows"),
    path("packs/", include("portal.templatepacks.urls")),
    path("topology/", include("portal.topology.urls")),
    path("executions/", include("portal.orchestration.urls")),
    path("state/", include("portal.monitoring.state_urls")),
    path("keys/", include("portal.keys.urls")),
    path("monitoring/", include("portal.monitoring.urls")),
    path("api/", include(api_urlpatterns)),
    path("", include("portal.restli.urls")),  # Gobblin's Rest.li resources, for Gobblin's clients
    path("", include("portal.monitoring.root_urls")),  # /metrics for Prometheus
    path("admin/", admin.site.urls),
    path("favicon.ico", RedirectView.as_view(url=static("img/favicon.svg"), permanent=True)),
]

handler403 = "portal.errors.permission_denied"
handler404 = "portal.errors.page_not_found"
handler500 = "portal.errors.server_error"
