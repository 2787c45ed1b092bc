"""Pages of the monitoring app."""

app_name = "monitoring"
urlpatterns: list = []
