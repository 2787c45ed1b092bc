"""REST API of the keys app."""

urlpatterns: list = []
