"""URL map: each app brings its pages (`<app>/urls.py`) and its API (`<app>/api.py`).

Nothing answers an anonymous visitor but the login page (and the favicon): every page sends
them there, the API answers 401, /metrics wants a sign-in or its bearer token
(`portal.monitoring.metrics.may_scrape`), and the API's schema and docs a sign-in unless
`API_SCHEMA_PUBLIC` opens them (tests/security/test_attacker_surfaces.py walks the map)."""

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import BasePermission

from portal.accounts import api as accounts_api
from portal.accounts import views as accounts_views
from portal.api_root import ApiRoot
from portal.flows import api as flows_api
from portal.flows import compile_api as flows_compile_api
from portal.flows import views as flows_views
from portal.flows.triggers import api as flows_trigger_api
from portal.flows.versions import api as flows_version_api
from portal.keys import api as keys_api
from portal.monitoring import api as monitoring_api
from portal.monitoring import views as monitoring_views
from portal.orchestration import api as orchestration_api
from portal.orchestration import webhook_api as orchestration_webhook_api
from portal.quotas import api as quotas_api
from portal.templatepacks import api as templatepacks_api
from portal.topology import api as topology_api
from portal.topology import connections_api as topology_connections_api


class SchemaReaders(BasePermission):
    """The OpenAPI schema names every operation and field of the API: for signed-in users
    (a session or an API token), or for anyone when the operator sets API_SCHEMA_PUBLIC."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return settings.API_SCHEMA_PUBLIC or bool(request.user and request.user.is_authenticated)


_swagger_ui = SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[SchemaReaders])


def api_docs(request: HttpRequest) -> HttpResponse:
    """Swagger UI: a browser without a session goes to the login page, as for every page."""
    if not (settings.API_SCHEMA_PUBLIC or request.user.is_authenticated):
        return redirect_to_login(request.get_full_path())
    return _swagger_ui(request)


# The admin's own login page sends anonymous visitors to the portal's: one way in (the
# directory's), not a second login form. (Wrapping the default site's bound view: a subclass
# would need a default_site of its own.)
admin.site.login = login_required(admin.site.login)  # type: ignore[method-assign]

api_urlpatterns = [
    *flows_compile_api.urlpatterns,
    *flows_api.urlpatterns,
    *flows_trigger_api.urlpatterns,
    *flows_version_api.urlpatterns,
    *accounts_api.urlpatterns,
    *templatepacks_api.urlpatterns,
    *topology_connections_api.urlpatterns,
    *topology_api.urlpatterns,
    *orchestration_api.urlpatterns,
    *orchestration_webhook_api.urlpatterns,
    *quotas_api.urlpatterns,
    *keys_api.urlpatterns,
    *monitoring_api.urlpatterns,
    path("schema/", SpectacularAPIView.as_view(permission_classes=[SchemaReaders]), name="schema"),
    path("docs/", api_docs, name="swagger-ui"),
]
# `GET /api/`: an index of the resources above (a 404 there read as "no API here").
api_urlpatterns.append(path("", ApiRoot.as_view(patterns=list(api_urlpatterns)), name="api-root"))

urlpatterns = [
    path("", monitoring_views.home, name="home"),  # the dashboard, or a newcomer's start page
    path("login/", accounts_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("flows/", include("portal.flows.urls")),
    path("account/", include("portal.accounts.urls")),
    path("people/", include("portal.accounts.people_urls")),  # staff manage users and groups
    path("notifications/", include("portal.events.urls")),
    # A pack's flows: the flow catalog answers under the pack's address.
    path("packs/<str:name>/flows/", flows_views.pack_flows, name="pack_flows"),
    path("packs/", include("portal.templatepacks.urls")),
    path("topology/", include("portal.topology.urls")),
    path("quotas/", include("portal.orchestration.quota_urls")),
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
