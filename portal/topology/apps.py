from django.apps import AppConfig


class TopologyConfig(AppConfig):
    name = "portal.topology"
    default_auto_field = "django.db.models.BigAutoField"
