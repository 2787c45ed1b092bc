"""REST API of the accounts app."""

urlpatterns: list = []
