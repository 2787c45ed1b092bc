"""Pages of the accounts app."""

from django.urls import path

from portal.accounts import views

app_name = "accounts"
urlpatterns = [
    path("", views.profile, name="profile"),
    path("tokens/new/", views.token_create, name="token-create"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]
