from django.apps import AppConfig


class TopologyConfig(AppConfig):
    name = "portal.topology"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Models are ready only now; the access rule of the topology catalog.
        from portal.topology import rules

        rules.register()
