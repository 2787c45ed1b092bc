"""REST API of the templatepacks app."""

urlpatterns: list = []
