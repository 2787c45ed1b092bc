"""REST API of the monitoring app."""

urlpatterns: list = []
