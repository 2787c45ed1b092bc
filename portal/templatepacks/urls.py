"""Pages of the templatepacks app."""

app_name = "templatepacks"
urlpatterns: list = []
