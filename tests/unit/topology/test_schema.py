"""The OpenAPI schema of the topology and compile endpoints builds cleanly."""

from __future__ import annotations

from django.urls import include, path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator

from portal.flows import compile_api
from portal.topology import api as topology_api

# Authentication classes are the accounts app's to describe (one
# OpenApiAuthenticationExtension there); every other warning here is ours.
NOT_OURS = "could not resolve authenticator"


def test_schema_for_topology_and_compile_endpoints_has_no_warnings():
    GENERATOR_STATS.reset()
    patterns = [path("api/", include([*compile_api.urlpatterns, *topology_api.urlpatterns]))]
    schema = SchemaGenerator(patterns=patterns).get_schema(request=None, public=True)
    problems = [
        message
        for message in [*GENERATOR_STATS._warn_cache, *GENERATOR_STATS._error_cache]
        if NOT_OURS not in message
    ]
    GENERATOR_STATS.reset()
    assert problems == []
    assert set(schema["paths"]) == {
        "/api/flowconfigs/compile",
        "/api/flowconfigs/{flowGroup}/{flowName}/jobs",
        "/api/topologies",
        "/api/topologies/{name}",
        "/api/datanodes",
        "/api/datanodes/{name}",
        "/api/datanodes/{name}/access-requests",
        "/api/datanodes/{name}/access-requests/{request_id}",
        "/api/datanodes/{name}/history",
    }
    executor = schema["components"]["schemas"]["SpecExecutor"]["properties"]
    assert {"sparkMaster", "sparkConf", "capabilities", "health", "userSources"} <= set(executor)
    node = schema["components"]["schemas"]["DataNode"]["properties"]
    assert {"owners", "userMade", "createdBy"} <= set(node)
