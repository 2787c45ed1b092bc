"""Pages of the templatepacks app."""

from django.urls import path

from portal.templatepacks import views

app_name = "templatepacks"
urlpatterns = [
    path("", views.pack_list, name="list"),
    path("new/", views.pack_create, name="create"),
    path("<str:name>/", views.pack_detail, name="detail"),
    path("<str:name>/history/", views.pack_history, name="history"),
    path("<str:name>/upload/", views.pack_upload, name="upload"),
    path("<str:name>/acl/", views.pack_acl, name="acl"),
    path("<str:name>/request-access/", views.pack_request_access, name="request-access"),
    path("<str:name>/access-requests/<int:request_id>/", views.pack_answer_request, name="answer-request"),
    path("<str:name>/delete/", views.pack_delete, name="delete"),
    path("<str:name>/versions/<int:number>/", views.pack_version, name="version"),
    path("<str:name>/compare/", views.pack_compare, name="compare"),
    path("<str:name>/versions/<int:number>/rollback/", views.pack_rollback, name="rollback"),
    path("<str:name>/new-template/", views.template_edit, name="template-create"),
    path("<str:name>/templates/<path:path>", views.template_detail, name="template"),
    path("<str:name>/edit/<path:path>", views.template_edit, name="template-edit"),
]
