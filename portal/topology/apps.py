from django.apps import AppConfig


class TopologyConfig(AppConfig):
    name = "portal.topology"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connects the compiler to flow and topology catalog events.
        from portal.topology import receivers  # noqa: F401
