from django.apps import AppConfig


class RestliConfig(AppConfig):
    """Gobblin's Rest.li resources at the site root, for Gobblin's own clients.
    The highest layer: it calls flows and orchestration, nothing calls it."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "portal.restli"
    label = "restli"
