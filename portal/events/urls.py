from django.urls import path

from portal.events import views

app_name = "events"
urlpatterns = [
    path("", views.notification_list, name="notifications"),
    path("read/", views.mark_all_read, name="mark_all_read"),
]
