from django.apps import AppConfig


class FlowsConfig(AppConfig):
    name = "portal.flows"

    def ready(self) -> None:
        # Connects the compiler to flow catalog events (receivers.py) and the
        # flows' template access re-check to template pack changes (packflows.py).
        from portal.flows import packflows, receivers  # noqa: F401
