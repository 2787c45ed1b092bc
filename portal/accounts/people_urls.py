"""Pages where staff manage users and groups, mounted at /people/."""

from django.urls import path

from portal.accounts import people_views as views

app_name = "people"
urlpatterns = [
    path("", views.user_list, name="users"),
    path("new/", views.user_create, name="user_create"),
    path("<int:user_id>/", views.user_detail, name="user"),
    path("<int:user_id>/active/", views.user_active, name="user_active"),
    path("groups/", views.group_list, name="groups"),
    path("groups/<int:group_id>/", views.group_detail, name="group"),
]
