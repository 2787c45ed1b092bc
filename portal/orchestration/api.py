"""REST API of the orchestration app."""

urlpatterns: list = []
