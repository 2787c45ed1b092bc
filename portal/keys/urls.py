"""Pages of the keys app."""

from django.urls import path

from portal.keys import views

app_name = "keys"
urlpatterns = [path("", views.key_list, name="list")]
