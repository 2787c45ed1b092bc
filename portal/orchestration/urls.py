"""Pages of the orchestration app."""

app_name = "orchestration"
urlpatterns: list = []
