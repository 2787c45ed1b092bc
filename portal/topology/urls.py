"""Pages of the topology app."""

app_name = "topology"
urlpatterns: list = []
