from django.apps import AppConfig


class OrchestrationConfig(AppConfig):
    name = "portal.orchestration"

    def ready(self) -> None:
        # Configure the Celery app in every Django process so the outbox relay
        # from the web or scheduler uses the settings' broker.
        import portal.celery  # noqa: F401
        from portal.orchestration import rules
        from portal.orchestration.control import cdc, receivers  # noqa: F401  (their receivers connect)
        from portal.orchestration.worker import guard

        guard.connect()
        rules.register()
