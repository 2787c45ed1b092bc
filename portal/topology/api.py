"""REST API of the topology app."""

urlpatterns: list = []
