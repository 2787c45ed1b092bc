"""The Rest.li resources at the site root, beside `/api/`: `/flowconfigs`,
`/flowconfigsV2`, `/flowstatuses`, `/flowexecutions`, each as a collection
and as `/<resource>/<complex key>`."""

from __future__ import annotations

from django.urls import re_path

from portal.restli.executions import FlowExecutionsResource, FlowStatusesResource
from portal.restli.flowconfigs import FlowConfigsResource, FlowConfigsV2Resource

RESOURCES = (FlowConfigsResource, FlowConfigsV2Resource, FlowStatusesResource, FlowExecutionsResource)

urlpatterns = [
    pattern
    for view in RESOURCES
    for pattern in (
        re_path(rf"^{view.resource}/?$", view.as_view(), name=f"restli-{view.resource}"),
        re_path(rf"^{view.resource}/(?P<key>[^/]+)$", view.as_view(), name=f"restli-{view.resource}-entity"),
    )
]
