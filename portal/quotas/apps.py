from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "portal.quotas"
    default_auto_field = "django.db.models.BigAutoField"
