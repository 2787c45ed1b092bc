"""Pages of the keys app."""

app_name = "keys"
urlpatterns: list = []
