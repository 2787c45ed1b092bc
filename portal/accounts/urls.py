"""Pages of the accounts app."""

app_name = "accounts"
urlpatterns: list = []
